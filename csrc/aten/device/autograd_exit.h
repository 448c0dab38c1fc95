// Autograd's device threads at interpreter exit (autograd_exit.cpp).
#pragma once

namespace neuron_sim {

// Makes every autograd device thread serving a neuron device finish the loop
// turn it is in, so none still holds a finished backward when Python begins
// to finalize. Call without the GIL. Gives up after timeoutMs (a thread busy
// with another thread's backward); returns whether every thread was reached.
bool drainAutogradDeviceThreads(int timeoutMs);

}  // namespace neuron_sim
