package org.deepgreen.dl4j;

import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.deeplearning4j.config.DL4JSystemProperties;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Where ND4J places this stack's arrays, and its cuDNN and TF32 state: the runs columns device,
 * device_name, cudnn_enabled, tf32_enabled, as line-protocol tokens (`deepgreen-dl4j device`
 * prints them for preflight; the run sends them in its SET). Asked of the backend ND4J loaded,
 * not of the build: a class path with the CUDA backend would place work on the GPU.
 * <ul>
 *   <li>device: cuda unless ND4J's environment says it runs on the CPU;</li>
 *   <li>device_name: on CUDA the first device's name from the executioner's environment
 *       information, else the backend's class (CpuBackend);</li>
 *   <li>cudnn_enabled: only with the deeplearning4j-cuda helpers on the class path and helpers
 *       allowed (this stack switches them off, so false);</li>
 *   <li>tf32_enabled: false; ND4J calls cuBLAS in its default math mode (no TF32) and has no
 *       cuDNN path here.</li>
 * </ul>
 */
final class DeviceInfo {
    private DeviceInfo() {}

    /** A class of deeplearning4j-cuda, the artifact that gives DL4J's layers a cuDNN path. */
    private static final String CUDNN_HELPER = "org.deeplearning4j.cuda.BaseCudnnHelper";

    static String tokens() {
        boolean cuda = !Nd4j.getEnvironment().isCPU();
        boolean cudnn = cuda && classPresent(CUDNN_HELPER) && Nd4j.getEnvironment().helpersAllowed()
            && !Boolean.getBoolean(DL4JSystemProperties.DISABLE_HELPER_PROPERTY);
        return "device=" + (cuda ? "cuda" : "cpu")
            + " device_name=" + HarnessClient.percentEncode(name(cuda))
            + " cudnn_enabled=" + cudnn + " tf32_enabled=false";
    }

    private static String name(boolean cuda) {
        String backend = Nd4j.getBackend().getClass().getSimpleName();
        if (!cuda) return backend;
        Properties info = Nd4j.getExecutioner().getEnvironmentInformation();
        Object devices = info.get("cuda.devicesInformation");
        if (devices instanceof List<?> list && !list.isEmpty() && list.get(0) instanceof Map<?, ?> first
                && first.get("cuda.deviceName") != null) {
            return first.get("cuda.deviceName") + " (" + backend + ")";
        }
        return backend;
    }

    private static boolean classPresent(String name) {
        try {
            Class.forName(name, false, DeviceInfo.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }
}
