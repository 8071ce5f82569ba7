//! The model: the TorchScript export of the PyTorch model (the one the C++ stack loads too),
//! made trainable with tch's `TrainableCModule`, holding the canonical initial weights.
//!
//! tch lists a module's parameters but not its buffers, so the export carries two methods
//! (deepgreen_audit/stacks/models_torch.py, `LibTorchHooks`): `state_buffers()`, the
//! BatchNorm running statistics by name (aliases, so copying into them sets the module's),
//! and `set_dropout(enabled)`, for the parity probe's train-mode pass without dropout.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use tch::{nn, Device, IValue, Tensor, TrainableCModule};

use crate::weights::NamedTensors;
use crate::Error;

pub struct Model {
    pub vs: nn::VarStore,
    module: TrainableCModule,
    /// Every canonical tensor name -> the module's own tensor (shared storage).
    tensors: BTreeMap<String, Tensor>,
}

fn buffers(module: &TrainableCModule) -> Result<HashMap<String, Tensor>, Error> {
    let mut out = HashMap::new();
    let reply = module.method_is("state_buffers", &[] as &[IValue]).map_err(|e| {
        format!("the TorchScript export has no state_buffers() method ({e}); an export written before \
                 the LibTorch hooks: delete the .torchscript.pt file and run 'deepgreen data prepare'")
    })?;
    match reply {
        IValue::GenericDict(items) => {
            for (key, value) in items {
                match (key, value) {
                    (IValue::String(name), IValue::Tensor(t)) => {
                        if !name.ends_with("num_batches_tracked") {
                            out.insert(name, t);
                        }
                    }
                    _ => return Err("state_buffers() must return Dict[str, Tensor]".into()),
                }
            }
        }
        other => return Err(format!("state_buffers() returned {other:?}, not a dict").into()),
    }
    Ok(out)
}

impl Model {
    /// Load the TorchScript module onto `device` and copy the canonical tensors into it by
    /// name; every canonical name must be a parameter or buffer of the module, with its shape.
    pub fn load(torchscript: &Path, weights: &NamedTensors, device: Device) -> Result<Model, Error> {
        let vs = nn::VarStore::new(device);
        let module = TrainableCModule::load(torchscript, vs.root())
            .map_err(|e| format!("{}: {e} (write it with 'deepgreen data prepare')", torchscript.display()))?;
        // TrainableCModule names each parameter with its dots replaced by underscores.
        let parameters = vs.variables();
        let buffers = buffers(&module)?;
        if parameters.len() + buffers.len() != weights.tensors.len() {
            return Err(format!("the TorchScript module has {} tensors, the export {}",
                               parameters.len() + buffers.len(), weights.tensors.len()).into());
        }
        let mut tensors = BTreeMap::new();
        tch::no_grad(|| -> Result<(), Error> {
            for (name, canonical) in &weights.tensors {
                let own = buffers
                    .get(name)
                    .or_else(|| parameters.get(&name.replace('.', "_")))
                    .ok_or_else(|| format!("the TorchScript module has no tensor {name}"))?;
                if own.size() != canonical.size() {
                    return Err(format!("{name}: shape {:?} in the module, {:?} in the export",
                                       own.size(), canonical.size()).into());
                }
                own.shallow_clone().f_copy_(canonical)?;
                tensors.insert(name.clone(), own.shallow_clone());
            }
            Ok(())
        })?;
        Ok(Model { vs, module, tensors })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        Ok(self.module.forward_ts(&[x])?)
    }

    pub fn train(&mut self) {
        self.module.set_train();
    }

    pub fn eval(&mut self) {
        self.module.set_eval();
    }

    /// Train mode (batch statistics) with dropout off: each framework draws its own dropout
    /// masks, so parity compares deterministic passes.
    pub fn train_without_dropout(&mut self) -> Result<(), Error> {
        self.module.set_train();
        self.module.method_is("set_dropout", &[IValue::Bool(false)])?;
        Ok(())
    }

    /// The canonical tensors as the module holds them now (copies, on the CPU).
    pub fn state(&self, prefix: &str) -> Vec<(String, Tensor)> {
        self.tensors
            .iter()
            .map(|(name, t)| (format!("{prefix}{name}"), t.detach().to_device(Device::Cpu).copy()))
            .collect()
    }
}
