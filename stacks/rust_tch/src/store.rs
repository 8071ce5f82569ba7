//! The canonical data store (deepgreen_audit/stacks/data.py): `<data_dir>/<dataset>/`
//! holds `train.npz` and `test.npz` (arrays `x`, uint8 N x H x W x 3, and `y`, int64 N) and
//! `manifest.json`, whose fingerprint is the SHA-256 over the bytes of train x, train y,
//! test x and test y.  The stack recomputes it over what it read and refuses a mismatch.

use std::path::Path;

use sha2::{Digest, Sha256};
use tch::{Kind, Tensor};

use crate::Error;

pub struct Split {
    pub x: Tensor, // uint8 N x H x W x 3
    pub y: Tensor, // int64 N
}

pub struct Store {
    pub train: Split,
    pub test: Split,
    pub fingerprint: String,
}

impl Store {
    /// The side of the square images, in pixels.
    pub fn side_px(&self) -> i64 {
        self.train.x.size()[1]
    }
}

fn raw_bytes(t: &Tensor) -> Vec<u8> {
    let numel = t.numel();
    let mut out = vec![0u8; numel * t.kind().elt_size_in_bytes()];
    // copy_data_u8 copies `numel` elements as raw bytes
    t.contiguous().copy_data_u8(&mut out, numel);
    out
}

fn read_split(path: &Path, digest: &mut Sha256) -> Result<Split, Error> {
    let arrays = Tensor::read_npz(path).map_err(|e| format!("{}: cannot be read: {e} (prepare it with \
                                                              'deepgreen data prepare')", path.display()))?;
    let find = |name: &str| {
        arrays
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.shallow_clone())
            .ok_or_else(|| format!("{}: needs an array {name}", path.display()))
    };
    let (x, y) = (find("x")?, find("y")?);
    if x.kind() != Kind::Uint8 || y.kind() != Kind::Int64 || x.dim() != 4 || y.dim() != 1 {
        return Err(format!("{}: x must be uint8 N x H x W x 3 and y int64 N", path.display()).into());
    }
    digest.update(raw_bytes(&x));
    digest.update(raw_bytes(&y));
    Ok(Split { x, y })
}

pub fn load(data_dir: &str, dataset: &str) -> Result<Store, Error> {
    let folder = Path::new(data_dir).join(dataset);
    let manifest_path = folder.join("manifest.json");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&manifest_path)
            .map_err(|e| format!("{}: {e} (prepare it with 'deepgreen data prepare')", manifest_path.display()))?,
    )?;
    let expected = manifest["fingerprint_sha256"]
        .as_str()
        .ok_or_else(|| format!("{}: no fingerprint_sha256", manifest_path.display()))?
        .to_string();
    let mut digest = Sha256::new();
    let train = read_split(&folder.join("train.npz"), &mut digest)?;
    let test = read_split(&folder.join("test.npz"), &mut digest)?;
    let fingerprint = format!("{:x}", digest.finalize());
    if fingerprint != expected {
        return Err(format!("{}: pixels and labels have fingerprint {fingerprint}, the manifest says {expected}",
                           folder.display()).into());
    }
    Ok(Store { train, test, fingerprint })
}

/// uint8 NHWC -> float32 NCHW in [0, 1]: divided by 255, no mean/std normalisation.
pub fn unit_interval(x_uint8: &Tensor) -> Tensor {
    x_uint8.permute([0, 3, 1, 2]).to_kind(Kind::Float).divide_scalar(255.0).contiguous()
}
