#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/shared_memory_setup.h"

#include "distributed/collective_check.h"
#include "runtime/environment.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <string>

namespace neuron_sim::distributed {
namespace {

// One segment every rank of the group maps, or none: rank 0 creates it and
// names it under `key` ("" for none: not `local`, or shared memory
// unavailable), each rank says whether it mapped it, and all use it only if all did.
template <class Segment>
std::unique_ptr<Segment> shareSegment(c10d::Store& store, int rank, int size, const std::string& key, bool local,
                                      const std::function<std::unique_ptr<Segment>(std::string*)>& create,
                                      const std::function<std::unique_ptr<Segment>(const std::string&)>& open) {
  std::unique_ptr<Segment> seg;
  std::string name;
  if (rank == 0) {
    if (local) seg = create(&name);
    store.set(key + "/name", name);
  } else {
    auto v = store.get(key + "/name");
    name.assign(v.begin(), v.end());
    if (!name.empty()) seg = open(name);
  }
  if (name.empty()) return nullptr;
  auto ok_key = [&](int p) { return key + "/mapped/" + std::to_string(p); };
  store.set(ok_key(rank), std::string(seg ? "1" : "0"));
  bool all = seg != nullptr;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    auto v = store.get(ok_key(p));
    all = all && v.size() == 1 && v[0] == '1';
  }
  if (rank == 0 && seg) seg->unlink();  // every peer has tried to open it by now
  return all ? std::move(seg) : nullptr;
}

}  // namespace

SharedMemory setUpSharedMemory(c10d::Store& store, int rank, int size, bool local) {
  // NEURON_SIM_AGREEMENT=store: what ranks on several machines do, on one
  // (tests cover that path so).
  if (rank == 0 && runtime::envValue("NEURON_SIM_AGREEMENT") == "store") local = false;
  SharedMemory shm;
  shm.matches = shareSegment<MatchTable>(
      store, rank, size, "neuron_agree/match", local, [&](std::string* name) { return MatchTable::create(size, name); },
      [&](const std::string& name) { return MatchTable::open(name, size); });
  shm.exchange = shareSegment<LocalExchange>(
      store, rank, size, "neuron_agree/local", local,
      [&](std::string* name) { return LocalExchange::create(size, kSignatureSlots, name); },
      [&](const std::string& name) { return LocalExchange::open(name, size, kSignatureSlots); });
  return shm;
}

}  // namespace neuron_sim::distributed
