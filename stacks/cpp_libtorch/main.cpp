// The C++/LibTorch stack of DeepGreen Audit.
//
//   deepgreen-libtorch train
//       one run under the harness: connects to 127.0.0.1:$DEEPGREEN_HARNESS_PORT,
//       speaks the line protocol (deepgreen_audit/collect/protocol.py, version 1),
//       takes its job (architecture, seed, recipe, data_dir...) from the HELLO reply.
//   deepgreen-libtorch device
//       the device it would use here, as the SET tokens of the protocol (one line).
//   deepgreen-libtorch probe --model TS --weights W --data DIR --dataset D --count N --out FILE
//       the parity hook: one eval-mode and one train-mode forward pass on the first N
//       test images, written as safetensors (deepgreen_audit/stacks/parity.py reads it).
//
// Inputs, all written by the Python side (`deepgreen data prepare`):
//   <data_dir>/<dataset>/{train,test}.npz, manifest.json     the canonical uint8 store
//   <data_dir>/weights/<arch>-c<classes>-s<seed>.torchscript.pt  the PyTorch model, scripted
//   <data_dir>/weights/<arch>-c<classes>-s<seed>.safetensors     the canonical initial weights
// The canonical weights are copied into the TorchScript module by name (every name must
// match), and their file's SHA-256 is what the run reports.
//
// The sources (stacks/README.md, "The C++ stack's layout"):
//   src/training.*     the LibTorch part: store and weights as tensors, model, train, probe
//   src/protocol.*     the harness client, HELLO's job, the percent codec
//   src/repr.*         Python's repr() of a float, the protocol's number form
//   src/json.*         JSON (nlohmann-json)            src/sha256.*  SHA-256 (OpenSSL EVP)
//   src/npz.*          .npz (libzip) and .npy           src/safetensors.*  the file layout
//   tests/             their unit tests (ctest; they need no LibTorch)

#include <iostream>
#include <map>
#include <stdexcept>
#include <string>

#include "src/training.hpp"

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "train") return deepgreen::train();
    if (mode == "device") return deepgreen::device_report();
    if (mode == "probe") {
      std::map<std::string, std::string> args;
      for (int i = 2; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
      return deepgreen::probe(args);
    }
    std::cerr << "usage: deepgreen-libtorch train   (under the DeepGreen runner)\n"
                 "       deepgreen-libtorch device  (the device it would use here, one line)\n"
                 "       deepgreen-libtorch probe --model TS --weights W --data DIR --dataset D --count N --out FILE\n";
    return 2;
  } catch (const std::exception& exc) {
    std::cerr << "deepgreen-libtorch: error: " << exc.what() << "\n";
    return 1;
  }
}
