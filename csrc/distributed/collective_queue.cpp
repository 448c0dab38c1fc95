#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/collective_queue.h"

#include <pthread.h>

namespace neuron_sim::distributed {
namespace {
thread_local bool t_queue_worker = false;
}  // namespace

bool CollectiveQueue::onWorker() { return t_queue_worker; }

std::unique_lock<std::mutex> CollectiveQueue::lock(bool idle) {
  std::unique_lock<std::mutex> l(mu_);
  if (idle) idle_cv_.wait(l, [this] { return this->idle(); });
  return l;
}

void CollectiveQueue::post(std::function<void()> item) {
  items_.push_back(std::move(item));
  if (!worker_.joinable()) worker_ = std::thread([this] { serve(); });
  cv_.notify_one();
}

void CollectiveQueue::serve() {
  t_queue_worker = true;
  pthread_setname_np(pthread_self(), "neuron_agree");  // else it bears its creator's name (an autograd thread's)
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !items_.empty(); });
    if (items_.empty()) return;  // stopping, nothing left
    auto item = std::move(items_.front());
    items_.pop_front();
    running_ = true;
    l.unlock();
    item();  // never throws: an item reports its failure through its Work
    item = nullptr;
    l.lock();
    running_ = false;
    if (idle()) idle_cv_.notify_all();
  }
}

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id())
    worker_.detach();
  else
    worker_.join();
}

}  // namespace neuron_sim::distributed
