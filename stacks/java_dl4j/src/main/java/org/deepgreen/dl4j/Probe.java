package org.deepgreen.dl4j;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.IntStream;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;

/**
 * The parity hook, writing what the C++ stack's probe writes: {@code input} (the loader's NCHW
 * batch), {@code labels}, {@code loaded.<name>} (every canonical tensor as the network holds it
 * after loading, back in PyTorch's layout), {@code eval.logits}/{@code eval.loss},
 * {@code train.logits}/{@code train.loss} (train mode: batch statistics, no dropout), and
 * {@code state.<name>} after that train-mode pass, i.e. with the running statistics moved once.
 */
final class Probe {
    private Probe() {}

    static void run(Path weightsPath, Path dataDir, String dataset, int count, Path out) throws Exception {
        Store store = Store.load(dataDir, dataset);
        if (count < 1 || count > store.test.count()) {
            throw new StackError("--count must lie in 1.." + store.test.count() + ", is " + count);
        }
        Safetensors.Contents weights = Safetensors.read(weightsPath);
        String architecture = metadata(weights, "architecture");
        int classes = Integer.parseInt(metadata(weights, "classes"));
        Loader.Batch batch;
        try (Loader loader = new Loader(store.test, IntStream.range(0, count).toArray(), count, 1, 1, classes)) {
            batch = loader.next();
        }
        // No dropout (each framework draws its own masks) and a learning rate of 0: see below.
        Models.Network network = Models.build(architecture, classes, store.sidePx(), false, 0, 0);
        Models.load(network, weights.tensors);

        Map<String, Safetensors.Tensor> tensors = new LinkedHashMap<>();
        tensors.put("input", tensor(batch.features));
        float[] labels = new float[batch.size()];
        for (int i = 0; i < labels.length; i++) labels[i] = batch.labels[i];
        tensors.put("labels", new Safetensors.Tensor(new long[] {labels.length}, labels));
        Map<String, Safetensors.Tensor> loaded = Models.state(network);
        loaded.forEach((name, t) -> tensors.put("loaded." + name, t));

        INDArray logits = network.logits(batch.features, false);
        tensors.put("eval.logits", tensor(logits));
        tensors.put("eval.loss", scalar(Logits.crossEntropySum(logits, batch.labels) / batch.size()));
        logits = network.logits(batch.features, true);
        tensors.put("train.logits", tensor(logits));
        tensors.put("train.loss", scalar(Logits.crossEntropySum(logits, batch.labels) / batch.size()));

        // DL4J moves BatchNorm's running statistics in the backward pass only (TorchBatchNorm), so
        // the train-mode pass that updates them is one training step on this batch: the same
        // forward pass as above, then the backward pass, whose running-statistics "gradients" are
        // applied as they are, while Adam with learning rate 0 turns every weight's step into 0.
        // The weights are then checked to be exactly as loaded.
        network.graph.fit(new DataSet(batch.features, batch.oneHotLabels));
        Map<String, Safetensors.Tensor> state = Models.state(network);
        for (Map.Entry<String, Safetensors.Tensor> entry : state.entrySet()) {
            String name = entry.getKey();
            if (!name.endsWith(".running_mean") && !name.endsWith(".running_var")
                    && !sameValues(entry.getValue().values, loaded.get(name).values)) {
                throw new StackError("the probe's statistics update changed the weight " + name);
            }
            tensors.put("state." + name, entry.getValue());
        }

        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("weights_sha256", weights.sha256);
        meta.put("data_fingerprint_sha256", store.fingerprint);
        meta.put("framework_version", Main.frameworkVersion());
        Safetensors.write(out, tensors, meta);
    }

    private static String metadata(Safetensors.Contents weights, String key) {
        String value = weights.metadata.get(key);
        if (value == null) throw new StackError("the weight export's metadata has no " + key);
        return value;
    }

    private static Safetensors.Tensor tensor(INDArray array) {
        return new Safetensors.Tensor(array.shape(), array.dup('c').reshape(array.length()).toFloatVector());
    }

    private static Safetensors.Tensor scalar(double value) {
        return new Safetensors.Tensor(new long[] {1}, new float[] {(float) value});
    }

    /** Equal as numbers, element by element (0.0 equals -0.0, as the parity check counts). */
    private static boolean sameValues(float[] a, float[] b) {
        if (a.length != b.length) return false;
        for (int i = 0; i < a.length; i++) if (a[i] != b[i]) return false;
        return true;
    }
}
