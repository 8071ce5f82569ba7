// The LibTorch part of the C++ stack (main.cpp lists its commands and inputs): the canonical
// store and weights as tensors, the TorchScript model, the training run under the harness and
// the parity probe.  Precision policy: float32, TF32 off (set below).  Adam's betas and
// epsilon are PyTorch's (LibTorch's defaults, deepgreen_audit/stacks/conventions.py); every
// recipe number comes from the harness.

#include "training.hpp"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "io.hpp"
#include "json.hpp"
#include "npz.hpp"
#include "protocol.hpp"
#include "repr.hpp"
#include "safetensors.hpp"
#include "sha256.hpp"

namespace deepgreen {

namespace {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

const std::string& param(const std::map<std::string, std::string>& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) fail("the harness's HELLO carries no " + key);
  return it->second;
}

// ------------------------------------------------------------------ safetensors

struct NamedTensors {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::string sha256;
};

NamedTensors read_safetensors(const std::string& path) {
  const std::string bytes = read_file(path);
  const SafetensorsLayout layout = parse_safetensors(bytes, path);
  NamedTensors out;
  out.sha256 = sha256_hex(bytes);
  for (const auto& entry : layout.entries) {
    if (entry.dtype != "F32") fail(path + ": " + entry.name + " is not F32");
    auto t = torch::empty(entry.shape, torch::kFloat32);
    if (size_t(t.numel()) * sizeof(float) != entry.end - entry.begin)
      fail(path + ": " + entry.name + " has the wrong byte count");
    std::memcpy(t.data_ptr<float>(), bytes.data() + layout.data_start + entry.begin, entry.end - entry.begin);
    out.tensors.emplace_back(entry.name, t);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorEntry> entries;
  std::string body;
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.detach().to(torch::kCPU).to(torch::kFloat32).contiguous();
    const size_t bytes = size_t(t.numel()) * sizeof(float);
    entries.push_back({name, "F32", t.sizes().vec(), body.size(), body.size() + bytes});
    body.append(reinterpret_cast<const char*>(t.data_ptr<float>()), bytes);
  }
  std::ofstream out(path, std::ios::binary);
  out << safetensors_header(entries, metadata) << body;
  if (!out) fail(path + ": cannot be written");
}

// ------------------------------------------------------------------ the canonical store (npz)

struct Split {
  torch::Tensor x;  // uint8 N x H x W x 3
  torch::Tensor y;  // int64 N
};

struct Store {
  Split train, test;
  std::string fingerprint;
};

Store load_store(const std::string& data_dir, const std::string& dataset) {
  std::string folder = data_dir + "/" + dataset;
  const std::string manifest_path = folder + "/manifest.json";
  const std::string expected = json_string(parse_json(read_file(manifest_path), manifest_path),
                                           "fingerprint_sha256", manifest_path);
  Store store;
  Sha256 sha;
  for (auto [name, split] : {std::pair<std::string, Split*>{"train", &store.train}, {"test", &store.test}}) {
    const std::string path = folder + "/" + name + ".npz";
    auto arrays = read_npz(path);
    if (!arrays.count("x") || !arrays.count("y")) fail(path + ": needs arrays x and y");
    const NpyArray& x = arrays["x"];
    const NpyArray& y = arrays["y"];
    if (x.descr != "|u1" || x.shape.size() != 4)
      fail(path + ": x must be uint8 N x H x W x 3 (it is " + x.descr + ", " + std::to_string(x.shape.size()) + "-d)");
    if (y.descr != "<i8" || y.shape.size() != 1 || y.shape[0] != x.shape[0])
      fail(path + ": y must be int64, one label per image (it is " + y.descr + ")");
    sha.update(x.bytes);
    sha.update(y.bytes);
    split->x = torch::empty(x.shape, torch::kUInt8);
    std::memcpy(split->x.data_ptr<uint8_t>(), x.bytes.data(), x.bytes.size());
    split->y = torch::empty(y.shape, torch::kInt64);
    std::memcpy(split->y.data_ptr<int64_t>(), y.bytes.data(), y.bytes.size());
  }
  store.fingerprint = sha.hex();
  if (store.fingerprint != expected)
    fail(folder + ": pixels and labels have fingerprint " + store.fingerprint + ", the manifest says " + expected);
  return store;
}

// uint8 NHWC -> float32 NCHW in [0, 1] (the specification: divided by 255, no mean/std).
torch::Tensor unit_interval(const torch::Tensor& x_uint8) {
  return x_uint8.permute({0, 3, 1, 2}).to(torch::kFloat32).div(255.0).contiguous();
}

// ------------------------------------------------------------------ the model

void load_canonical(torch::jit::script::Module& module, const NamedTensors& weights) {
  std::map<std::string, torch::Tensor> own;
  for (const auto& p : module.named_parameters(true)) own[p.name] = p.value;
  for (const auto& b : module.named_buffers(true))
    if (b.name.find("num_batches_tracked") == std::string::npos) own[b.name] = b.value;
  if (own.size() != weights.tensors.size())
    fail("the TorchScript module has " + std::to_string(own.size()) + " tensors, the export " +
         std::to_string(weights.tensors.size()));
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : weights.tensors) {
    auto it = own.find(name);
    if (it == own.end()) fail("the TorchScript module has no tensor " + name);
    if (it->second.sizes() != tensor.sizes()) fail(name + ": shape differs from the export");
    it->second.copy_(tensor);
  }
}

// Train mode with dropout off (the parity probe: each framework draws its own masks).
void train_without_dropout(torch::jit::script::Module& module) {
  module.train(true);
  for (auto m : module.named_modules()) {
    auto type_name = m.value.type()->name();
    if (type_name && type_name->qualifiedName().find("Dropout") != std::string::npos) m.value.train(false);
  }
}

std::string weights_stem(const std::string& data_dir, const std::string& arch, const std::string& classes,
                         const std::string& seed) {
  return data_dir + "/weights/" + arch + "-c" + classes + "-s" + seed;
}

// ------------------------------------------------------------------ training

struct Batch {
  torch::Tensor x, y;
};

// Batches prepared by `workers` threads ahead of the training loop (the spec's loader workers).
class Loader {
 public:
  Loader(const Split& split, int64_t batch_size, int workers, torch::Tensor order, int64_t limit)
      : split_(split), batch_size_(batch_size), workers_(std::max(1, workers)), order_(std::move(order)) {
    batches_ = (split.y.size(0) + batch_size - 1) / batch_size;
    if (limit > 0) batches_ = std::min(batches_, limit);
    for (int64_t i = 0; i < std::min<int64_t>(workers_, batches_); ++i) schedule();
  }
  bool next(Batch& batch) {
    if (pending_.empty()) return false;
    batch = pending_.front().get();
    pending_.erase(pending_.begin());
    if (scheduled_ < batches_) schedule();
    return true;
  }

 private:
  void schedule() {
    int64_t start = scheduled_++ * batch_size_;
    int64_t end = std::min(start + batch_size_, split_.y.size(0));
    torch::Tensor idx = order_.slice(0, start, end);
    pending_.push_back(std::async(std::launch::async, [this, idx] {
      return Batch{unit_interval(split_.x.index_select(0, idx)), split_.y.index_select(0, idx)};
    }));
  }
  const Split& split_;
  int64_t batch_size_;
  int workers_;
  torch::Tensor order_;
  int64_t batches_ = 0, scheduled_ = 0;
  std::vector<std::future<Batch>> pending_;
};

void set_precision_policy() {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

// Where LibTorch places this stack's model and batches, and its cuDNN and TF32 state (the runs
// columns device, device_name, cudnn_enabled, tf32_enabled), as the SET tokens of the protocol;
// `deepgreen-libtorch device` prints them for preflight before a campaign's first run.
std::string device_tokens(const torch::Device& device) {
  const bool cuda = device.is_cuda();
  const bool cudnn = cuda && at::globalContext().userEnabledCuDNN() && torch::cuda::cudnn_is_available();
  const bool tf32 = cuda && (at::globalContext().allowTF32CuBLAS() || at::globalContext().allowTF32CuDNN());
  return std::string("device=") + (cuda ? "cuda" : "cpu") + " device_name=" + percent_encode(device.str()) +
         " cudnn_enabled=" + (cudnn ? "true" : "false") + " tf32_enabled=" + (tf32 ? "true" : "false");
}

torch::Device run_device() { return torch::cuda::is_available() ? torch::kCUDA : torch::kCPU; }

// The LibTorch build this process loaded (environment.framework_backend, in the form of the
// Python stack's torch.version.cuda): `cpu` for a CPU-only build, `cuda-<major>.<minor>` for a
// CUDA build (the CUDA runtime it was built against), `+cudnn-<major>.<minor>.<patch>` added
// when it was built with cuDNN.  A fact of the build, not of the host: a CUDA build on a host
// without a GPU runs on the CPU, which `device` says.
std::string framework_backend() {
  auto& context = at::globalContext();
  if (!context.hasCUDART()) return "cpu";
  const long cudart = context.versionCUDART();        // 1000 major + 10 minor
  std::string backend = "cuda-" + std::to_string(cudart / 1000) + "." + std::to_string(cudart % 1000 / 10);
  if (!context.hasCuDNN()) return backend;
  const long cudnn = context.versionCuDNN();          // 10000 major + 100 minor + patch from 9, 1000 major before
  const long major_unit = cudnn >= 90000 ? 10000 : 1000;
  return backend + "+cudnn-" + std::to_string(cudnn / major_unit) + "." +
         std::to_string(cudnn % major_unit / 100) + "." + std::to_string(cudnn % 100);
}

}  // namespace

int device_report() {
  set_precision_policy();
  std::cout << device_tokens(run_device()) << std::endl;
  return 0;
}

int train() {
  const char* port = std::getenv("DEEPGREEN_HARNESS_PORT");
  if (!port) fail("DEEPGREEN_HARNESS_PORT is not set: run this stack under the DeepGreen runner");
  HarnessClient client(std::stoi(port));
  auto job = client.hello("cpp-libtorch");
  if (param(job, "optimizer") != "adam" || param(job, "lr_schedule") != "none" ||
      param(job, "input_scaling") != "unit-interval" || param(job, "input_normalisation") != "none")
    fail("this stack implements Adam, no schedule, unit-interval inputs without normalisation only");
  set_precision_policy();
  const std::string data_dir = param(job, "data_dir");
  const int64_t seed = std::stoll(param(job, "seed"));
  torch::manual_seed(uint64_t(seed));
  torch::Device device = run_device();
  Store store = load_store(data_dir, param(job, "dataset"));
  std::string stem = weights_stem(data_dir, param(job, "architecture"), param(job, "classes"), param(job, "seed"));
  auto module = torch::jit::load(stem + ".torchscript.pt");
  NamedTensors weights = read_safetensors(stem + ".safetensors");
  load_canonical(module, weights);
  module.to(device);
  std::vector<torch::Tensor> params;
  for (const auto& p : module.parameters()) params.push_back(p);
  const double lr = std::stod(param(job, "learning_rate"));
  const double weight_decay = std::stod(param(job, "weight_decay"));
  torch::optim::Adam optimizer(params, torch::optim::AdamOptions(lr).weight_decay(weight_decay));
  const int64_t batch_size = std::stoll(param(job, "batch_size"));
  const int64_t eval_batch_size = std::stoll(param(job, "eval_batch_size"));
  const int workers = std::stoi(param(job, "loader_workers"));
  const int epochs = std::stoi(param(job, "epochs"));
  const int64_t max_train = job.count("max_train_batches") ? std::stoll(job["max_train_batches"]) : 0;
  const int64_t max_eval = job.count("max_eval_batches") ? std::stoll(job["max_eval_batches"]) : 0;

  std::string set = "SET";
  for (const char* key : {"optimizer", "learning_rate", "batch_size", "lr_schedule", "weight_decay",
                          "input_scaling", "input_normalisation", "loader_workers", "eval_batch_size",
                          "precision_policy"})
    set += std::string(" ") + key + "=" + percent_encode(param(job, key));
  set += " input_resolution_px=" + std::to_string(store.train.x.size(1));
  set += " initial_weights_sha256=" + weights.sha256 + " data_fingerprint_sha256=" + store.fingerprint;
  set += " framework=libtorch framework_version=" + percent_encode(TORCH_VERSION);
  set += " framework_backend=" + percent_encode(framework_backend());
  set += std::string(" cudnn_available=") + (torch::cuda::cudnn_is_available() ? "true" : "false");
  set += " " + device_tokens(device);
  client.request(set);

  auto sync = [&] { if (device.is_cuda()) torch::cuda::synchronize(); };
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    std::string e = std::to_string(epoch);
    sync();
    client.request("BEGIN " + e + " train");
    module.train(true);
    Loader train(store.train, batch_size, workers, torch::randperm(store.train.y.size(0)), max_train);
    double total = 0;
    int64_t seen = 0;
    Batch b;
    while (train.next(b)) {
      optimizer.zero_grad();
      auto logits = module.forward({b.x.to(device)}).toTensor();
      auto loss = torch::nn::functional::cross_entropy(logits, b.y.to(device));
      loss.backward();
      optimizer.step();
      total += loss.item<double>() * double(b.y.size(0));
      seen += b.y.size(0);
    }
    sync();
    client.request("END " + e + " train samples=" + std::to_string(seen) + " loss=" + python_repr(total / double(seen)));
    client.request("BEGIN " + e + " eval");
    module.eval();
    Loader test(store.test, eval_batch_size, workers, torch::arange(store.test.y.size(0)), max_eval);
    total = 0;
    seen = 0;
    int64_t correct = 0;
    {
      torch::NoGradGuard no_grad;
      while (test.next(b)) {
        auto y = b.y.to(device);
        auto logits = module.forward({b.x.to(device)}).toTensor();
        total += torch::nn::functional::cross_entropy(logits, y).item<double>() * double(b.y.size(0));
        correct += logits.argmax(1).eq(y).sum().item<int64_t>();
        seen += b.y.size(0);
      }
    }
    sync();
    client.request("END " + e + " eval samples=" + std::to_string(seen) + " loss=" + python_repr(total / double(seen)) +
                   " accuracy=" + python_repr(double(correct) / double(seen)));
  }
  client.request("BYE");
  return 0;
}

int probe(const std::map<std::string, std::string>& args) {
  set_precision_policy();
  for (const char* key : {"--model", "--weights", "--data", "--dataset", "--count", "--out"})
    if (!args.count(key)) fail(std::string("probe needs ") + key);
  Store store = load_store(args.at("--data"), args.at("--dataset"));
  int64_t count = std::stoll(args.at("--count"));
  Loader loader(store.test, count, 1, torch::arange(store.test.y.size(0)), 1);
  Batch b;
  loader.next(b);
  auto module = torch::jit::load(args.at("--model"));
  NamedTensors weights = read_safetensors(args.at("--weights"));
  load_canonical(module, weights);
  std::vector<std::pair<std::string, torch::Tensor>> out{{"input", b.x}, {"labels", b.y.to(torch::kFloat32)}};
  for (const auto& p : module.named_parameters(true)) out.emplace_back("loaded." + p.name, p.value.clone());
  for (const auto& p : module.named_buffers(true))
    if (p.name.find("num_batches_tracked") == std::string::npos) out.emplace_back("loaded." + p.name, p.value.clone());
  torch::NoGradGuard no_grad;
  module.eval();
  auto logits = module.forward({b.x}).toTensor();
  out.emplace_back("eval.logits", logits);
  out.emplace_back("eval.loss", torch::nn::functional::cross_entropy(logits, b.y).reshape({1}));
  train_without_dropout(module);
  logits = module.forward({b.x}).toTensor();
  out.emplace_back("train.logits", logits);
  out.emplace_back("train.loss", torch::nn::functional::cross_entropy(logits, b.y).reshape({1}));
  for (const auto& p : module.named_parameters(true)) out.emplace_back("state." + p.name, p.value);
  for (const auto& p : module.named_buffers(true))
    if (p.name.find("num_batches_tracked") == std::string::npos) out.emplace_back("state." + p.name, p.value);
  write_safetensors(args.at("--out"), out,
                    {{"weights_sha256", weights.sha256}, {"data_fingerprint_sha256", store.fingerprint},
                     {"framework_version", TORCH_VERSION}});
  return 0;
}

}  // namespace deepgreen
