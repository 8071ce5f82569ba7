package org.deepgreen.dl4j;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

import org.deeplearning4j.config.DL4JSystemProperties;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The Java/DL4J stack of DeepGreen Audit, with the C++ stack's two modes and command line:
 * <pre>
 *   deepgreen-dl4j train
 *       one run under the harness: connects to 127.0.0.1:$DEEPGREEN_HARNESS_PORT, speaks the
 *       line protocol (docs/protocol.md, version 1), takes its job from the HELLO reply.
 *   deepgreen-dl4j device
 *       the device ND4J places this stack's work on here, one line (DeviceInfo), for preflight.
 *   deepgreen-dl4j probe --model TS --weights W --data DIR --dataset D --count N --out FILE
 *       the parity hook: eval-mode and train-mode passes on the first N test images, written
 *       as safetensors (deepgreen_audit/stacks/parity.py reads it); --model (the TorchScript
 *       file of the LibTorch stacks) is accepted and not used.
 * </pre>
 * Inputs are what the Python side writes: the canonical store (Store) and the canonical initial
 * weights (Safetensors, mapped by name in Models). Backend: the ND4J backend the build put on the
 * class path (nd4j-native or nd4j-cuda, see pom.xml), in float32 only.
 */
public final class Main {
    private Main() {}

    private static final String PROGRAM = "deepgreen-dl4j";
    private static final int EXIT_ERROR = 1;
    private static final int EXIT_USAGE = 2;
    private static final String USAGE = "usage: " + PROGRAM + " train   (under the DeepGreen runner)\n"
        + "       " + PROGRAM + " device  (the device it would use here, one line)\n"
        + "       " + PROGRAM + " probe --model TS --weights W --data DIR --dataset D --count N --out FILE";
    private static final String[] PROBE_OPTIONS = {"--model", "--weights", "--data", "--dataset", "--count", "--out"};
    private static final String ND4J_POM_FOLDER = "META-INF/maven/org.nd4j/";
    private static final String DL4J_POM_PROPERTIES = "/META-INF/maven/org.deeplearning4j/deeplearning4j-nn/pom.properties";

    public static void main(String[] args) {
        System.exit(run(args));
    }

    private static int run(String[] args) {
        String mode = args.length > 0 ? args[0] : "";
        try {
            if (mode.equals("train") && args.length == 1) {
                configureBackend();
                Training.run();
                return 0;
            }
            if (mode.equals("device") && args.length == 1) {
                configureBackend();
                System.out.println(DeviceInfo.tokens());
                return 0;
            }
            if (mode.equals("probe")) {
                Map<String, String> options = probeOptions(args);
                if (options == null) return usage();
                configureBackend();
                Probe.run(Path.of(options.get("--weights")), Path.of(options.get("--data")), options.get("--dataset"),
                    Integer.parseInt(options.get("--count")), Path.of(options.get("--out")));
                return 0;
            }
            return usage();
        } catch (StackError e) {
            return error(e.getMessage());
        } catch (NumberFormatException e) {
            return error("not a number: " + e.getMessage());
        } catch (Throwable e) {
            return error(e.getClass().getName() + (e.getMessage() == null ? "" : ": " + e.getMessage()));
        }
    }

    /** The probe's --key value pairs, or null when one is missing, repeated or unknown. */
    private static Map<String, String> probeOptions(String[] args) {
        if (args.length % 2 != 1) return null;
        Map<String, String> options = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!Arrays.asList(PROBE_OPTIONS).contains(args[i]) || options.put(args[i], args[i + 1]) != null) {
                return null;
            }
        }
        return options.size() == PROBE_OPTIONS.length ? options : null;
    }

    private static int usage() {
        System.err.println(USAGE);
        return EXIT_USAGE;
    }

    private static int error(String message) {
        System.err.println(PROGRAM + ": error: " + message);
        return EXIT_ERROR;
    }

    /**
     * float32 throughout, and the same code path on every build of the CPU backend: DL4J's layer
     * helpers (MKLDNN*Helper, which call oneDNN through libnd4j) are switched off, and so are
     * libnd4j's platform helpers. The nd4j-native linux-x86_64 binary this stack is built with
     * contains no oneDNN (libnd4jcpu.so has no dnnl symbols; that build is the separate
     * linux-x86_64-onednn classifier), so convolutions run libnd4j's im2col + OpenBLAS sgemm
     * either way; switching the helpers off makes that explicit and keeps a oneDNN build from
     * silently taking another path (its batch-norm helper would also bypass TorchBatchNorm's
     * arithmetic). The CUDA backend's build has no cuDNN either (not the -cudnn classifier, no
     * deeplearning4j-cuda helpers), and its platform helpers are off too: no cuDNN path at all.
     */
    private static void configureBackend() {
        System.setProperty(DL4JSystemProperties.DISABLE_HELPER_PROPERTY, "true");
        try {
            Nd4j.getBackend();
        } catch (Throwable e) {     // ND4J's static initialiser printed which library did not load
            Throwable cause = e;
            while (cause.getCause() != null) cause = cause.getCause();
            throw new StackError("ND4J loaded no backend (" + cause.getClass().getSimpleName() + ", the library "
                + "that failed is named above); a build for cuda needs an NVIDIA driver and GPU: on a host "
                + "without them run 'deepgreen build java-dl4j --backend cpu'");
        }
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        Nd4j.getEnvironment().allowHelpers(false);
    }

    /**
     * The ND4J backend this process loaded (nd4j-native, nd4j-cuda-11.6, ...): the Maven artifact
     * of the jar that holds Nd4j's backend class, as that jar's pom.properties names it. What ran,
     * not what the build meant: the audit compares it with the specification's backend.
     */
    static String backend() throws IOException {
        Class<?> loaded = Nd4j.getBackend().getClass();
        File jar;
        try {
            jar = new File(loaded.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (URISyntaxException e) {
            throw new StackError("cannot locate the jar of ND4J's backend " + loaded.getName() + ": " + e.getMessage());
        }
        try (JarFile file = new JarFile(jar)) {
            for (JarEntry entry : Collections.list(file.entries())) {
                String[] parts = entry.getName().split("/");
                if (parts.length == 5 && entry.getName().startsWith(ND4J_POM_FOLDER) && parts[4].equals("pom.properties")) {
                    Properties properties = new Properties();
                    try (InputStream in = file.getInputStream(entry)) {
                        properties.load(in);
                    }
                    return properties.getProperty("artifactId");
                }
            }
        }
        throw new StackError(jar + ", which holds ND4J's backend " + loaded.getName() + ", names no " + ND4J_POM_FOLDER + "*/pom.properties");
    }

    /** DL4J's version, as its own jar states it (not written into this source). */
    static String frameworkVersion() throws IOException {
        try (InputStream in = ComputationGraph.class.getResourceAsStream(DL4J_POM_PROPERTIES)) {
            if (in == null) throw new StackError("deeplearning4j-nn's " + DL4J_POM_PROPERTIES + " is not on the class path");
            Properties properties = new Properties();
            properties.load(in);
            return properties.getProperty("version");
        }
    }
}
