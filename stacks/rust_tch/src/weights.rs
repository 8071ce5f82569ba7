//! The canonical initial weights (deepgreen_audit/stacks/weights.py): one safetensors file in
//! PyTorch's names and layout, whose SHA-256 is what a run reports; and the probe's output,
//! safetensors again (F32, with metadata), read back by deepgreen_audit/stacks/parity.py.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};
use tch::{Kind, Tensor};

use crate::Error;

pub struct NamedTensors {
    pub tensors: Vec<(String, Tensor)>,
    pub sha256: String,
}

pub fn read(path: &Path) -> Result<NamedTensors, Error> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("{}: {e} (write it with 'deepgreen data prepare')", path.display()))?;
    let sha256 = format!("{:x}", Sha256::digest(&bytes));
    let tensors = Tensor::read_safetensors(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (name, t) in &tensors {
        if t.kind() != Kind::Float {
            return Err(format!("{}: {name} is not F32", path.display()).into());
        }
    }
    Ok(NamedTensors { tensors, sha256 })
}

/// Write float32 tensors with string metadata (tch's own writer has no metadata).
pub fn write(path: &Path, tensors: &[(String, Tensor)], metadata: &BTreeMap<String, String>) -> Result<(), Error> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::to_value(metadata)?);
    let mut body: Vec<u8> = Vec::new();
    for (name, tensor) in tensors {
        let t = tensor.detach().to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous();
        let numel = t.numel();
        let mut data = vec![0u8; numel * 4]; // not-recipe: bytes of a float32
        t.copy_data_u8(&mut data, numel);
        let begin = body.len();
        body.extend_from_slice(&data);
        header.insert(name.clone(), serde_json::json!({
            "dtype": "F32", "shape": t.size(), "data_offsets": [begin, body.len()],
        }));
    }
    let mut text = serde_json::to_vec(&serde_json::Value::Object(header))?;
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&body);
    std::fs::write(path, out).map_err(|e| format!("{}: cannot be written: {e}", path.display()).into())
}
