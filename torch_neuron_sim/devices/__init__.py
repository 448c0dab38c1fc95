"""Devices, as PyTorch asks about them: which exist and which is current
(device.py), streams and events (streams.py), the stream-order checker
(stream_check.py), each device's random generator (random.py), and --map-cuda
(cuda_map.py), autograd's device threads at exit (autograd_exit.py). The C++ side is csrc/runtime/device*, stream* and csrc/aten/device/."""
