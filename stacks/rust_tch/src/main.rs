//! The Rust/tch stack of DeepGreen Audit, the third member of the LibTorch control group.
//!
//!   deepgreen-tch train
//!       one run under the harness: connects to 127.0.0.1:$DEEPGREEN_HARNESS_PORT, speaks the
//!       line protocol (docs/protocol.md, version 1) and takes its job (architecture, seed,
//!       recipe, data_dir...) from the HELLO reply; no recipe value is written here.
//!   deepgreen-tch probe --model TS --weights W --data DIR --dataset D --count N --out FILE
//!       the parity hook: one eval-mode and one train-mode forward pass (dropout off) on the
//!       first N test images, written as safetensors (deepgreen_audit/stacks/parity.py).
//!
//! It runs the same TorchScript module as the C++ stack, on the same LibTorch (the torch
//! wheel's, through torch-sys's LIBTORCH_USE_PYTORCH), trained with LibTorch's own Adam
//! (tch's `nn::Adam` wraps `torch::optim::Adam`), from the canonical weights and the canonical
//! store that `deepgreen data prepare` writes.

mod model;
mod protocol;
mod store;
mod weights;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use tch::{nn, nn::OptimizerConfig, Device, Kind, Tensor};

use crate::model::Model;
use crate::protocol::{percent_encode, python_repr, Client};
use crate::store::{unit_interval, Split, Store};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

const STACK: &str = "rust-tch";
const FRAMEWORK: &str = "tch";
/// The tch crate this binary was built with (build.rs reads it from Cargo.lock).
const FRAMEWORK_VERSION: &str = env!("DEEPGREEN_TCH_VERSION");

/// Adam's betas and epsilon: PyTorch's (deepgreen_audit/stacks/conventions.py), the update
/// rule of the reference stack; LibTorch's Adam applies them.
const ADAM_BETA1: f64 = 0.9;
const ADAM_BETA2: f64 = 0.999;
const ADAM_EPSILON: f64 = 1e-8;

/// The precision policy fp32-tf32-off.  tch exposes no TF32 switch, so TF32 is refused at the
/// CUDA libraries' level (cuBLAS and cuDNN read this before their first handle), which is set
/// before LibTorch touches a GPU; LibTorch's float32 matmul precision is "highest" by default.
fn set_precision_policy() {
    std::env::set_var("NVIDIA_TF32_OVERRIDE", "0");
}

/// Where tch places this stack's model and batches, and its cuDNN and TF32 state (the runs
/// columns device, device_name, cudnn_enabled, tf32_enabled) as protocol tokens; `deepgreen-tch
/// device` prints them for preflight.  device_name is tch's own name of the device (`Cuda(0)`,
/// `Cpu`); TF32 is on for a GPU unless NVIDIA_TF32_OVERRIDE=0 (the precision policy) refuses it.
fn device_tokens(device: Device) -> String {
    let cuda = device.is_cuda();
    let tf32 = cuda && std::env::var("NVIDIA_TF32_OVERRIDE").map_or(true, |v| v != "0");
    format!("device={} device_name={} cudnn_enabled={} tf32_enabled={tf32}",
            if cuda { "cuda" } else { "cpu" }, percent_encode(&format!("{device:?}")),
            cuda && tch::Cuda::user_enabled_cudnn() && tch::Cuda::cudnn_is_available())
}

/// The LibTorch build tch loaded (environment.framework_backend, in the form of the Python
/// stack's torch.version.cuda): `cpu` for a CPU-only build, `cuda-<major>.<minor>` for a CUDA
/// build (the CUDA runtime it was built against), `+cudnn-<major>.<minor>.<patch>` added when
/// it was built with cuDNN.  A fact of the process, not of the host: a binary linked without
/// libtorch_cuda (the linker drops it unless told otherwise) has LibTorch's CPU part only, and a
/// CUDA build on a host without a GPU runs on the CPU, which `device` says.
fn framework_backend() -> String {
    if !tch::utils::has_cudart() {
        return "cpu".to_string();
    }
    let cudart = tch::utils::version_cudart();             // 1000 major + 10 minor
    let backend = format!("cuda-{}.{}", cudart / 1000, cudart % 1000 / 10);
    // LibTorch throws (tch panics) where the CUDA build has no cuDNN: then the backend has none
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let cudnn = std::panic::catch_unwind(tch::utils::version_cudnn).unwrap_or(0);
    std::panic::set_hook(quiet);
    if cudnn <= 0 {
        return backend;
    }
    let major_unit = if cudnn >= 90000 { 10000 } else { 1000 };   // 10000 major + 100 minor + patch from 9
    format!("{backend}+cudnn-{}.{}.{}", cudnn / major_unit, cudnn % major_unit / 100, cudnn % 100)
}

type Job = BTreeMap<String, String>;

fn param<'a>(job: &'a Job, key: &str) -> Result<&'a str, Error> {
    job.get(key).map(String::as_str).ok_or_else(|| format!("the harness's HELLO carries no {key}").into())
}

fn number<T: std::str::FromStr>(job: &Job, key: &str) -> Result<T, Error> {
    let text = param(job, key)?;
    text.parse().map_err(|_| format!("HELLO {key}={text:?} is not a number").into())
}

fn weights_stem(data_dir: &str, arch: &str, classes: &str, seed: &str) -> PathBuf {
    Path::new(data_dir).join("weights").join(format!("{arch}-c{classes}-s{seed}"))
}

struct Batch {
    x: Tensor,
    y: Tensor,
}

/// Batches prepared by `workers` threads ahead of the training loop (the spec's loader workers).
struct Loader {
    x: Tensor,
    y: Tensor,
    order: Tensor,
    batch_size: i64,
    batches: i64,
    scheduled: i64,
    workers: usize,
    pending: VecDeque<JoinHandle<Batch>>,
}

impl Loader {
    fn new(split: &Split, batch_size: i64, workers: usize, order: Tensor, limit: Option<i64>) -> Loader {
        let n = split.y.size()[0];
        let mut batches = (n + batch_size - 1) / batch_size;
        if let Some(limit) = limit {
            batches = batches.min(limit);
        }
        let mut loader = Loader {
            x: split.x.shallow_clone(), y: split.y.shallow_clone(), order, batch_size, batches,
            scheduled: 0, workers: workers.max(1), pending: VecDeque::new(),
        };
        while loader.scheduled < loader.batches && loader.pending.len() < loader.workers {
            loader.schedule();
        }
        loader
    }

    fn schedule(&mut self) {
        let start = self.scheduled * self.batch_size;
        let end = (start + self.batch_size).min(self.y.size()[0]);
        let idx = self.order.narrow(0, start, end - start);
        let (x, y) = (self.x.shallow_clone(), self.y.shallow_clone());
        self.pending.push_back(std::thread::spawn(move || Batch {
            x: unit_interval(&x.index_select(0, &idx)),
            y: y.index_select(0, &idx),
        }));
        self.scheduled += 1;
    }

    fn next(&mut self) -> Option<Batch> {
        let batch = self.pending.pop_front()?.join().expect("a loader thread panicked");
        if self.scheduled < self.batches {
            self.schedule();
        }
        Some(batch)
    }
}

fn sync(device: Device) {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
}

fn train() -> Result<(), Error> {
    let port: u16 = std::env::var("DEEPGREEN_HARNESS_PORT")
        .map_err(|_| "DEEPGREEN_HARNESS_PORT is not set: run this stack under the DeepGreen runner")?
        .parse()?;
    let mut client = Client::connect(port)?;
    let job = client.hello(STACK)?;
    if param(&job, "optimizer")? != "adam" || param(&job, "lr_schedule")? != "none"
        || param(&job, "input_scaling")? != "unit-interval" || param(&job, "input_normalisation")? != "none"
    {
        return Err("this stack implements Adam, no schedule, unit-interval inputs without normalisation only".into());
    }
    let data_dir = param(&job, "data_dir")?;
    let seed: i64 = number(&job, "seed")?;
    tch::manual_seed(seed);
    let device = Device::cuda_if_available();
    let store = store::load(data_dir, param(&job, "dataset")?)?;
    let stem = weights_stem(data_dir, param(&job, "architecture")?, param(&job, "classes")?, param(&job, "seed")?);
    let canonical = weights::read(&stem.with_extension("safetensors"))?;
    let mut model = Model::load(&stem.with_extension("torchscript.pt"), &canonical, device)?;
    let mut optimizer = nn::Adam { beta1: ADAM_BETA1, beta2: ADAM_BETA2, wd: number(&job, "weight_decay")?,
                                   eps: ADAM_EPSILON, amsgrad: false }
        .build(&model.vs, number(&job, "learning_rate")?)?;
    let batch_size: i64 = number(&job, "batch_size")?;
    let eval_batch_size: i64 = number(&job, "eval_batch_size")?;
    let workers: usize = number(&job, "loader_workers")?;
    let epochs: i64 = number(&job, "epochs")?;
    let max_train: Option<i64> = job.get("max_train_batches").map(|_| number(&job, "max_train_batches")).transpose()?;
    let max_eval: Option<i64> = job.get("max_eval_batches").map(|_| number(&job, "max_eval_batches")).transpose()?;

    let mut set = String::from("SET");
    for key in ["optimizer", "learning_rate", "batch_size", "lr_schedule", "weight_decay", "input_scaling",
                "input_normalisation", "loader_workers", "eval_batch_size", "precision_policy"] {
        set += &format!(" {key}={}", percent_encode(param(&job, key)?));
    }
    set += &format!(" input_resolution_px={} initial_weights_sha256={} data_fingerprint_sha256={}",
                    store.side_px(), canonical.sha256, store.fingerprint);
    set += &format!(" framework={FRAMEWORK} framework_version={} framework_backend={} cudnn_available={}",
                    percent_encode(FRAMEWORK_VERSION), percent_encode(&framework_backend()),
                    tch::Cuda::cudnn_is_available());
    set += &format!(" {}", device_tokens(device));
    client.request(&set)?;

    let n_train = store.train.y.size()[0];
    let n_test = store.test.y.size()[0];
    for epoch in 1..=epochs {
        sync(device);
        client.request(&format!("BEGIN {epoch} train"))?;
        model.train();
        let mut loader = Loader::new(&store.train, batch_size, workers,
                                     Tensor::randperm(n_train, (Kind::Int64, Device::Cpu)), max_train);
        let (mut total, mut seen) = (0.0f64, 0i64);
        while let Some(b) = loader.next() {
            let logits = model.forward(&b.x.to_device(device))?;
            let loss = logits.cross_entropy_for_logits(&b.y.to_device(device));
            optimizer.backward_step(&loss);
            let n = b.y.size()[0];
            total += loss.double_value(&[]) * n as f64;
            seen += n;
        }
        sync(device);
        client.request(&format!("END {epoch} train samples={seen} loss={}", python_repr(total / seen as f64)))?;
        client.request(&format!("BEGIN {epoch} eval"))?;
        model.eval();
        let mut loader = Loader::new(&store.test, eval_batch_size, workers,
                                     Tensor::arange(n_test, (Kind::Int64, Device::Cpu)), max_eval);
        let (mut total, mut seen, mut correct) = (0.0f64, 0i64, 0i64);
        tch::no_grad(|| -> Result<(), Error> {
            while let Some(b) = loader.next() {
                let y = b.y.to_device(device);
                let logits = model.forward(&b.x.to_device(device))?;
                let n = b.y.size()[0];
                total += logits.cross_entropy_for_logits(&y).double_value(&[]) * n as f64;
                correct += logits.argmax(1, false).eq_tensor(&y).sum(Kind::Int64).int64_value(&[]);
                seen += n;
            }
            Ok(())
        })?;
        sync(device);
        client.request(&format!("END {epoch} eval samples={seen} loss={} accuracy={}",
                                python_repr(total / seen as f64), python_repr(correct as f64 / seen as f64)))?;
    }
    client.request("BYE")?;
    Ok(())
}

fn probe(args: &BTreeMap<String, String>) -> Result<(), Error> {
    let arg = |key: &str| args.get(key).map(String::as_str).ok_or_else(|| format!("probe needs {key}"));
    let (model_path, weights_path, out) = (arg("--model")?, arg("--weights")?, arg("--out")?);
    let store: Store = store::load(arg("--data")?, arg("--dataset")?)?;
    let count: i64 = arg("--count")?.parse()?;
    let mut loader = Loader::new(&store.test, count, 1, Tensor::arange(store.test.y.size()[0],
                                                                       (Kind::Int64, Device::Cpu)), Some(1));
    let b = loader.next().ok_or("the test split is empty")?;
    let canonical = weights::read(Path::new(weights_path))?;
    let mut model = Model::load(Path::new(model_path), &canonical, Device::Cpu)?;
    let mut out_tensors = vec![("input".to_string(), b.x.shallow_clone()),
                               ("labels".to_string(), b.y.to_kind(Kind::Float))];
    out_tensors.extend(model.state("loaded."));
    tch::no_grad(|| -> Result<(), Error> {
        model.eval();
        let logits = model.forward(&b.x)?;
        out_tensors.push(("eval.loss".into(), logits.cross_entropy_for_logits(&b.y).reshape([1])));
        out_tensors.push(("eval.logits".into(), logits));
        model.train_without_dropout()?;
        let logits = model.forward(&b.x)?;
        out_tensors.push(("train.loss".into(), logits.cross_entropy_for_logits(&b.y).reshape([1])));
        out_tensors.push(("train.logits".into(), logits));
        Ok(())
    })?;
    out_tensors.extend(model.state("state."));
    let metadata = BTreeMap::from([
        ("weights_sha256".to_string(), canonical.sha256.clone()),
        ("data_fingerprint_sha256".to_string(), store.fingerprint.clone()),
        ("framework_version".to_string(), FRAMEWORK_VERSION.to_string()),
    ]);
    weights::write(Path::new(out), &out_tensors, &metadata)
}

fn main() {
    set_precision_policy();
    let argv: Vec<String> = std::env::args().collect();
    let result = match argv.get(1).map(String::as_str) {
        Some("train") => train(),
        Some("device") => {
            println!("{}", device_tokens(Device::cuda_if_available()));
            Ok(())
        }
        Some("probe") => probe(&argv[2..].chunks(2).filter(|p| p.len() == 2)
                                   .map(|p| (p[0].clone(), p[1].clone())).collect()),
        _ => {
            eprintln!("usage: deepgreen-tch train   (under the DeepGreen runner)\n       \
                       deepgreen-tch device  (the device it would use here, one line)\n       \
                       deepgreen-tch probe --model TS --weights W --data DIR --dataset D --count N --out FILE");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("deepgreen-tch: error: {e}");
        std::process::exit(1);
    }
}
