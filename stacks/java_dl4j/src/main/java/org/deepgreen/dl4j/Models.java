package org.deepgreen.dl4j;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration.GraphBuilder;
import org.deeplearning4j.nn.conf.ConvolutionMode;
import org.deeplearning4j.nn.conf.GradientNormalization;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.graph.ElementWiseVertex;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.ActivationLayer;
import org.deeplearning4j.nn.conf.layers.ConvolutionLayer;
import org.deeplearning4j.nn.conf.layers.DenseLayer;
import org.deeplearning4j.nn.conf.layers.GlobalPoolingLayer;
import org.deeplearning4j.nn.conf.layers.LossLayer;
import org.deeplearning4j.nn.conf.layers.PoolingType;
import org.deeplearning4j.nn.conf.layers.SubsamplingLayer;
import org.deeplearning4j.nn.conf.layers.Upsampling2D;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.weights.WeightInit;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.regularization.Regularization;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * ResNet-18 and VGG-16 as DL4J computation graphs, layer for layer as
 * deepgreen_audit/stacks/models_torch.py (torchvision), and the mapping between their parameters
 * and the canonical tensors (PyTorch names and layout).
 *
 * <p>Layers are named by their PyTorch module path ({@code layer2.0.downsample.0},
 * {@code classifier.6}), so a DL4J parameter {@code <layer>_<key>} maps to
 * {@code <layer>.<torch name>}. Convolution kernels have the same layout in both (OIHW); DL4J's
 * dense kernels are [in, out], PyTorch's [out, in]; DL4J holds biases as [1, n].
 *
 * <p>Padding is explicit and symmetric everywhere (ConvolutionMode.Truncate: output side
 * floor((in + 2 pad - kernel) / stride) + 1, as PyTorch); never Same, which pads stride-2 layers
 * asymmetrically. The network ends in the logits layer (no activation) and a loss layer applying
 * softmax and cross-entropy averaged over the batch.
 */
final class Models {
    private Models() {}

    static final String INPUT = "input";
    private static final String LOSS = "loss";

    private static final int STEM_KERNEL = 7;
    private static final int STEM_STRIDE = 2;
    private static final int STEM_PADDING = 3;
    private static final int STEM_POOL_KERNEL = 3;
    private static final int STEM_POOL_STRIDE = 2;
    private static final int STEM_POOL_PADDING = 1;
    private static final int BLOCK_KERNEL = 3;
    private static final int BLOCK_PADDING = 1;
    private static final int VGG_KERNEL = 3;
    private static final int VGG_PADDING = 1;
    private static final int VGG_POOL = 2;

    /** A built network and the name of its logits layer. */
    static final class Network {
        final ComputationGraph graph;
        final String logitsLayer;

        Network(ComputationGraph graph, String logitsLayer) {
            this.graph = graph;
            this.logitsLayer = logitsLayer;
        }

        /** The logits of a batch, in train mode (batch statistics, dropout if built with it) or eval mode. */
        INDArray logits(INDArray features, boolean train) {
            return graph.output(List.of(logitsLayer), train, new INDArray[] {features}, null)[0];
        }
    }

    /**
     * The architecture for sidePx x sidePx inputs and `classes` outputs, trained by Adam with
     * PyTorch's rule at `learningRate` and coupled weight decay `weightDecay`; VGG's dropout
     * only if `dropout`. Parameters start at zero: {@link #load} sets every one of them.
     */
    static Network build(String architecture, int classes, int sidePx, boolean dropout, double learningRate,
            double weightDecay) {
        NeuralNetConfiguration.Builder defaults = new NeuralNetConfiguration.Builder()
            .dataType(DataType.FLOAT)
            .updater(new TorchAdam(learningRate))
            .weightInit(WeightInit.ZERO)
            .convolutionMode(ConvolutionMode.Truncate)
            .gradientNormalization(GradientNormalization.None)
            .miniBatch(true);
        if (weightDecay != 0) {
            List<Regularization> decay = List.of(new CoupledWeightDecay(weightDecay));
            defaults.regularization(decay).regularizationBias(decay);
        }
        GraphBuilder graph = defaults.graphBuilder()
            .addInputs(INPUT)
            .setInputTypes(InputType.convolutional(sidePx, sidePx, Store.CHANNELS));
        String logits;
        switch (architecture) {
            case "resnet18":
                logits = resnet18(graph, classes);
                break;
            case "vgg16":
                logits = vgg16(graph, classes, sidePx, dropout);
                break;
            default:
                throw new StackError("unknown architecture " + architecture + " (this stack builds resnet18, vgg16)");
        }
        graph.addLayer(LOSS, new LossLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX).build(), logits)
            .setOutputs(LOSS);
        ComputationGraph network = new ComputationGraph(graph.build());
        network.init();
        return new Network(network, logits);
    }

    private static String resnet18(GraphBuilder g, int classes) {
        String x = conv(g, "conv1", INPUT, Store.CHANNELS, Conventions.RESNET18_STEM_CHANNELS, STEM_KERNEL,
            STEM_STRIDE, STEM_PADDING, false, Activation.IDENTITY);
        x = relu(g, "relu", batchNorm(g, "bn1", x));
        g.addLayer("maxpool", new SubsamplingLayer.Builder(PoolingType.MAX)
            .kernelSize(STEM_POOL_KERNEL, STEM_POOL_KERNEL).stride(STEM_POOL_STRIDE, STEM_POOL_STRIDE)
            .padding(STEM_POOL_PADDING, STEM_POOL_PADDING).build(), x);
        x = "maxpool";
        int channels = Conventions.RESNET18_STEM_CHANNELS;
        for (int stage = 0; stage < Conventions.RESNET18_STAGES.length; stage++) {
            int width = Conventions.RESNET18_STAGES[stage][0];
            for (int block = 0; block < Conventions.RESNET18_BLOCKS_PER_STAGE; block++) {
                int stride = block == 0 ? Conventions.RESNET18_STAGES[stage][1] : 1;
                x = basicBlock(g, "layer" + (stage + 1) + "." + block, x, channels, width, stride);
                channels = width;
            }
        }
        g.addLayer("avgpool", new GlobalPoolingLayer.Builder(PoolingType.AVG).build(), x);
        g.addLayer("fc", new DenseLayer.Builder().nIn(channels).nOut(classes).activation(Activation.IDENTITY).build(), "avgpool");
        return "fc";
    }

    /** torchvision's BasicBlock: two 3x3 convolutions with BatchNorm, identity or 1x1 projection, ReLU after the sum. */
    private static String basicBlock(GraphBuilder g, String name, String input, int in, int out, int stride) {
        String y = conv(g, name + ".conv1", input, in, out, BLOCK_KERNEL, stride, BLOCK_PADDING, false, Activation.IDENTITY);
        y = relu(g, name + ".relu1", batchNorm(g, name + ".bn1", y));
        y = conv(g, name + ".conv2", y, out, out, BLOCK_KERNEL, 1, BLOCK_PADDING, false, Activation.IDENTITY);
        y = batchNorm(g, name + ".bn2", y);
        String shortcut = input;
        if (stride != 1 || in != out) {
            shortcut = conv(g, name + ".downsample.0", input, in, out, 1, stride, 0, false, Activation.IDENTITY);
            shortcut = batchNorm(g, name + ".downsample.1", shortcut);
        }
        g.addVertex(name + ".add", new ElementWiseVertex(ElementWiseVertex.Op.Add), y, shortcut);
        return relu(g, name + ".relu", name + ".add");
    }

    private static String vgg16(GraphBuilder g, int classes, int sidePx, boolean dropout) {
        String x = INPUT;
        int channels = Store.CHANNELS;
        int side = sidePx;
        int index = 0; // the torchvision index in `features`: a convolution and its ReLU take two
        for (int item : Conventions.VGG16_FEATURES) {
            String name = "features." + index;
            if (item == Conventions.POOL) {
                g.addLayer(name, new SubsamplingLayer.Builder(PoolingType.MAX)
                    .kernelSize(VGG_POOL, VGG_POOL).stride(VGG_POOL, VGG_POOL).build(), x);
                x = name;
                side /= VGG_POOL;
                index += 1;
            } else {
                x = conv(g, name, x, channels, item, VGG_KERNEL, 1, VGG_PADDING, true, Activation.RELU);
                channels = item;
                index += 2;
            }
        }
        // AdaptiveAvgPool2d(7): every 7x7 window of a 1x1 map is that one pixel, so the pool
        // replicates it 49 times (nearest-neighbour upsampling by 7); on a 7x7 map it is the identity.
        if (side == 1) {
            g.addLayer("avgpool", new Upsampling2D.Builder(Conventions.VGG_POOL_SIDE).build(), x);
            x = "avgpool";
        } else if (side != Conventions.VGG_POOL_SIDE) {
            throw new StackError("VGG-16's 7x7 adaptive average pool is implemented for feature maps of 1x1 "
                + "(replicated) or 7x7 (identity); " + sidePx + "x" + sidePx + " inputs give " + side + "x" + side);
        }
        double retain = 1 - Conventions.VGG_DROPOUT;
        int pooled = channels * Conventions.VGG_POOL_SIDE * Conventions.VGG_POOL_SIDE;
        int hidden = Conventions.VGG16_HIDDEN;
        // The flattening preprocessor DL4J inserts reads NCHW in C order: c * 49 + h * 7 + w, as torch.flatten.
        g.addLayer("classifier.0", new DenseLayer.Builder().nIn(pooled).nOut(hidden).activation(Activation.RELU).build(), x);
        // PyTorch's Dropout modules follow the ReLUs; DL4J's dropout acts on a layer's input.
        DenseLayer.Builder second = new DenseLayer.Builder().nIn(hidden).nOut(hidden).activation(Activation.RELU);
        DenseLayer.Builder last = new DenseLayer.Builder().nIn(hidden).nOut(classes).activation(Activation.IDENTITY);
        if (dropout) {
            second.dropOut(retain);
            last.dropOut(retain);
        }
        g.addLayer("classifier.3", second.build(), "classifier.0");
        g.addLayer("classifier.6", last.build(), "classifier.3");
        return "classifier.6";
    }

    private static String conv(GraphBuilder g, String name, String input, int in, int out, int kernel, int stride,
            int padding, boolean bias, Activation activation) {
        g.addLayer(name, new ConvolutionLayer.Builder(kernel, kernel).stride(stride, stride).padding(padding, padding)
            .nIn(in).nOut(out).hasBias(bias).activation(activation).build(), input);
        return name;
    }

    private static String batchNorm(GraphBuilder g, String name, String input) {
        g.addLayer(name, new TorchBatchNorm(), input);
        return name;
    }

    private static String relu(GraphBuilder g, String name, String input) {
        g.addLayer(name, new ActivationLayer.Builder().activation(Activation.RELU).build(), input);
        return name;
    }

    // ------------------------------------------------------------------ canonical tensors

    /** How a DL4J parameter relates to its canonical tensor. */
    private enum Layout { SAME, DENSE_KERNEL, VECTOR }

    private static final class Mapping {
        final String canonicalName;
        final Layout layout;

        Mapping(String canonicalName, Layout layout) {
            this.canonicalName = canonicalName;
            this.layout = layout;
        }
    }

    /** DL4J's {@code <layer>_<key>} -> the canonical name and layout. */
    private static Mapping mapping(String dl4jName, INDArray param) {
        int split = dl4jName.lastIndexOf('_');
        String layer = dl4jName.substring(0, split);
        String key = dl4jName.substring(split + 1);
        switch (key) {
            case "W":
                return new Mapping(layer + ".weight", param.rank() == 2 ? Layout.DENSE_KERNEL : Layout.SAME);
            case "b":
                return new Mapping(layer + ".bias", Layout.VECTOR);
            case "gamma":
                return new Mapping(layer + ".weight", Layout.VECTOR);
            case "beta":
                return new Mapping(layer + ".bias", Layout.VECTOR);
            case "mean":
                return new Mapping(layer + ".running_mean", Layout.VECTOR);
            case "var":
                return new Mapping(layer + ".running_var", Layout.VECTOR);
            default:
                throw new StackError("DL4J parameter " + dl4jName + " has no canonical counterpart");
        }
    }

    /**
     * Sets every DL4J parameter from the canonical tensor of its name; every canonical tensor must
     * be used exactly once, with the same shape (after the layout change).
     */
    static void load(Network network, Map<String, Safetensors.Tensor> canonical) {
        Set<String> used = new HashSet<>();
        for (Map.Entry<String, INDArray> entry : network.graph.paramTable().entrySet()) {
            INDArray target = entry.getValue();
            Mapping m = mapping(entry.getKey(), target);
            if (!used.add(m.canonicalName)) throw new StackError("two DL4J parameters map to " + m.canonicalName);
            Safetensors.Tensor tensor = canonical.get(m.canonicalName);
            if (tensor == null) {
                throw new StackError("the weight export has no tensor " + m.canonicalName + " (DL4J parameter " + entry.getKey() + ")");
            }
            INDArray source = Nd4j.create(tensor.values, tensor.shape, 'c');
            if (m.layout == Layout.DENSE_KERNEL) source = source.transpose();
            if (m.layout == Layout.VECTOR && source.rank() == 1 && target.isVector() && source.length() == target.length()) {
                source = source.reshape(target.shape()); // DL4J holds some vectors as [1, n]
            }
            if (!Arrays.equals(source.shape(), target.shape())) {
                throw new StackError(m.canonicalName + ": shape " + Arrays.toString(tensor.shape)
                    + " does not fit DL4J's " + Arrays.toString(target.shape()) + " (" + m.layout + ")");
            }
            target.assign(source);
        }
        Set<String> unused = new TreeSet<>(canonical.keySet());
        unused.removeAll(used);
        if (!unused.isEmpty()) throw new StackError("the network has no parameter for " + unused);
    }

    /** Every parameter and running statistic as a canonical tensor (PyTorch name and layout), sorted by name. */
    static Map<String, Safetensors.Tensor> state(Network network) {
        Map<String, Safetensors.Tensor> out = new TreeMap<>();
        for (Map.Entry<String, INDArray> entry : network.graph.paramTable().entrySet()) {
            INDArray param = entry.getValue();
            Mapping m = mapping(entry.getKey(), param);
            INDArray torch = m.layout == Layout.DENSE_KERNEL ? param.transpose() : param;
            long[] shape = m.layout == Layout.VECTOR ? new long[] {param.length()} : torch.shape();
            out.put(m.canonicalName, new Safetensors.Tensor(shape, torch.dup('c').reshape(torch.length()).toFloatVector()));
        }
        return out;
    }
}
