package org.deepgreen.dl4j;

import java.nio.file.Path;
import java.util.Map;
import java.util.Random;
import java.util.stream.IntStream;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One run under the harness: HELLO, SET, then per epoch a train block (one pass over the
 * shuffled train split, one Adam step per batch) and an eval block (the test split in order),
 * then BYE. Every recipe number comes from the job. ND4J's CUDA backend queues work on the GPU,
 * so every boundary first waits for it (sync; the CPU backend computes synchronously): a block's
 * boundary is sent only after its work is done.
 */
final class Training {
    private Training() {}

    /** The recipe keys, reported back in SET as used. */
    private static final String[] TEXT_KEYS = {"optimizer", "lr_schedule", "input_scaling", "input_normalisation",
        "precision_policy"};
    private static final String[] REAL_KEYS = {"learning_rate", "weight_decay"};
    private static final String[] INTEGER_KEYS = {"batch_size", "loader_workers", "eval_batch_size"};

    static void run() throws Exception {
        String port = System.getenv("DEEPGREEN_HARNESS_PORT");
        if (port == null) throw new StackError("DEEPGREEN_HARNESS_PORT is not set: run this stack under the DeepGreen runner");
        try (HarnessClient harness = new HarnessClient(Integer.parseInt(port))) {
            Job job = new Job(harness.hello());
            job.require("optimizer", "adam");
            job.require("lr_schedule", "none");
            job.require("input_scaling", "unit-interval");
            job.require("input_normalisation", "none");
            job.require("precision_policy", "fp32-tf32-off");
            train(harness, job);
        }
    }

    private static void train(HarnessClient harness, Job job) throws Exception {
        long seed = Long.parseLong(job.get("seed"));
        Nd4j.getRandom().setSeed(seed); // dropout masks
        Random shuffle = new Random(seed);
        Path dataDir = Path.of(job.get("data_dir"));
        String architecture = job.get("architecture");
        int classes = job.integer("classes");
        double learningRate = job.real("learning_rate");
        double weightDecay = job.real("weight_decay");
        int batchSize = job.integer("batch_size");
        int evalBatchSize = job.integer("eval_batch_size");
        int workers = job.integer("loader_workers");
        int epochs = job.integer("epochs");
        long maxTrain = job.has("max_train_batches") ? job.integer("max_train_batches") : 0;
        long maxEval = job.has("max_eval_batches") ? job.integer("max_eval_batches") : 0;

        Store store = Store.load(dataDir, job.get("dataset"));
        Safetensors.Contents weights = Safetensors.read(
            dataDir.resolve("weights").resolve(architecture + "-c" + classes + "-s" + job.get("seed") + ".safetensors"));
        Models.Network network = Models.build(architecture, classes, store.sidePx(), true, learningRate, weightDecay);
        Models.load(network, weights.tensors);

        StringBuilder set = new StringBuilder("SET");
        for (String key : TEXT_KEYS) set.append(pair(key, job.get(key)));
        for (String key : REAL_KEYS) set.append(pair(key, PythonRepr.of(job.real(key))));
        for (String key : INTEGER_KEYS) set.append(pair(key, Integer.toString(job.integer(key))));
        set.append(pair("input_resolution_px", Integer.toString(store.sidePx())))
            .append(pair("initial_weights_sha256", weights.sha256))
            .append(pair("data_fingerprint_sha256", store.fingerprint))
            .append(pair("framework", "dl4j"))
            .append(pair("framework_version", Main.frameworkVersion()))
            .append(pair("framework_backend", Main.backend()))
            .append(pair("cudnn_available", "false")) // no cuDNN on any path of either backend (Main)
            .append(" ").append(DeviceInfo.tokens());
        harness.request(set.toString());

        int[] trainOrder = IntStream.range(0, store.train.count()).toArray();
        int[] testOrder = IntStream.range(0, store.test.count()).toArray();
        for (int epoch = 1; epoch <= epochs; epoch++) {
            permute(trainOrder, shuffle);
            sync();
            harness.request("BEGIN " + epoch + " train");
            double lossSum = 0;
            long samples = 0;
            try (Loader loader = new Loader(store.train, trainOrder, batchSize, maxTrain, workers, classes)) {
                for (Loader.Batch b = loader.next(); b != null; b = loader.next()) {
                    network.graph.fit(new DataSet(b.features, b.oneHotLabels));
                    lossSum += network.graph.score() * b.size(); // the batch's mean cross-entropy
                    samples += b.size();
                }
            }
            sync();
            harness.request("END " + epoch + " train samples=" + samples + " loss=" + PythonRepr.of(lossSum / samples));

            sync();
            harness.request("BEGIN " + epoch + " eval");
            lossSum = 0;
            samples = 0;
            long correct = 0;
            try (Loader loader = new Loader(store.test, testOrder, evalBatchSize, maxEval, workers, classes)) {
                for (Loader.Batch b = loader.next(); b != null; b = loader.next()) {
                    INDArray logits = network.logits(b.features, false);
                    lossSum += Logits.crossEntropySum(logits, b.labels);
                    correct += Logits.correct(logits, b.labels);
                    samples += b.size();
                }
            }
            sync();
            harness.request("END " + epoch + " eval samples=" + samples + " loss=" + PythonRepr.of(lossSum / samples)
                + " accuracy=" + PythonRepr.of((double) correct / samples));
        }
        harness.request("BYE");
    }

    /** Waits for the work ND4J has queued (on the GPU; a no-op on the CPU backend). */
    private static void sync() {
        Nd4j.getExecutioner().commit();
    }

    /** Fisher-Yates from the run's seeded generator: a new permutation every epoch. */
    private static void permute(int[] order, Random random) {
        for (int i = order.length - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }

    private static String pair(String key, String value) {
        return " " + key + "=" + HarnessClient.percentEncode(value);
    }

    /** The HELLO reply's job; unknown keys are ignored. */
    private static final class Job {
        private final Map<String, String> values;

        Job(Map<String, String> values) {
            this.values = values;
        }

        boolean has(String key) {
            return values.containsKey(key);
        }

        String get(String key) {
            String value = values.get(key);
            if (value == null) throw new StackError("the harness's HELLO carries no " + key);
            return value;
        }

        int integer(String key) {
            try {
                return Integer.parseInt(get(key));
            } catch (NumberFormatException e) {
                throw new StackError("the job's " + key + " is not an integer: " + get(key));
            }
        }

        double real(String key) {
            try {
                return Double.parseDouble(get(key));
            } catch (NumberFormatException e) {
                throw new StackError("the job's " + key + " is not a number: " + get(key));
            }
        }

        void require(String key, String supported) {
            if (!get(key).equals(supported)) {
                throw new StackError("this stack implements " + key + "=" + supported + " only, the job asks for " + get(key));
            }
        }
    }
}
