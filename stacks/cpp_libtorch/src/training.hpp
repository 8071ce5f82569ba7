// The LibTorch part of the stack: the canonical store and weights as tensors, the
// TorchScript model, the training run under the harness and the parity probe.
#pragma once

#include <map>
#include <string>

namespace deepgreen {

// `deepgreen-libtorch train`: one run under the harness (port in $DEEPGREEN_HARNESS_PORT).
int train();
// `deepgreen-libtorch device`: the device tokens of SET, one line, for preflight.
int device_report();
// `deepgreen-libtorch probe --model TS --weights W --data DIR --dataset D --count N --out FILE`.
int probe(const std::map<std::string, std::string>& args);

}  // namespace deepgreen
