package org.deepgreen.dl4j;

import java.util.Collection;
import java.util.List;

import org.deeplearning4j.nn.conf.CNN2DFormat;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.BatchNormalization;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.params.BatchNormalizationParamInitializer;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.common.primitives.Pair;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.learning.regularization.Regularization;

/**
 * DL4J's BatchNormalization set to PyTorch's BatchNorm2d (Conventions: epsilon 1e-5, decay 0.9,
 * the variance itself stored, not log10 of the standard deviation), with two corrections where
 * DL4J's arithmetic differs from PyTorch's:
 * <ul>
 * <li>Running variance. Both normalise a training batch with its biased variance, but DL4J also
 *     moves the running variance towards the biased one, PyTorch towards the unbiased one
 *     (n / (n - 1), n = batch x height x width). {@link Layer} replaces DL4J's update with the
 *     unbiased one. (At 32x32 ResNet-18's last stage has 1x1 maps, so n is the batch size and
 *     the two differ by a factor 1 + 1 / (batch - 1) in the batch's share of the update.)</li>
 * <li>Weight decay. DL4J never regularises gamma and beta; torch.optim.Adam's weight_decay
 *     applies to every parameter, so gamma takes the weights' and beta the biases' regularisation.</li>
 * </ul>
 * DL4J updates the running statistics in the backward pass, not the forward pass: the backward
 * pass writes "running - new running" into the running statistics' gradient slots, which a NoOp
 * updater leaves as they are and the step subtracts. A forward pass alone moves nothing.
 */
final class TorchBatchNorm extends BatchNormalization {
    TorchBatchNorm() {
        setDecay(Conventions.BATCHNORM_DECAY);
        setEps(Conventions.BATCHNORM_EPSILON);
        setUseLogStd(false);
        setLockGammaBeta(false);
        setCnn2DFormat(CNN2DFormat.NCHW);
    }

    @Override
    public org.deeplearning4j.nn.api.Layer instantiate(NeuralNetConfiguration conf,
            Collection<TrainingListener> trainingListeners, int layerIndex, INDArray layerParamsView,
            boolean initializeParams, DataType networkDataType) {
        Layer layer = new Layer(conf, networkDataType);
        layer.setListeners(trainingListeners);
        layer.setIndex(layerIndex);
        layer.setParamsViewArray(layerParamsView);
        layer.setParamTable(initializer().init(conf, layerParamsView, initializeParams));
        layer.setConf(conf);
        return layer;
    }

    @Override
    public List<Regularization> getRegularizationByParam(String paramName) {
        switch (paramName) {
            case BatchNormalizationParamInitializer.GAMMA:
                return getRegularization();
            case BatchNormalizationParamInitializer.BETA:
                return getRegularizationBias();
            default:
                return null; // running statistics: not parameters
        }
    }

    /** The layer: DL4J's, with the running-variance update made PyTorch's (unbiased). */
    static final class Layer extends org.deeplearning4j.nn.layers.normalization.BatchNormalization {
        private static final int[] NCHW_REDUCTION_DIMS = {0, 2, 3};
        private static final int[] DENSE_REDUCTION_DIMS = {0};

        Layer(NeuralNetConfiguration conf, DataType dataType) {
            super(conf, dataType);
        }

        @Override
        public Pair<Gradient, INDArray> backpropGradient(INDArray epsilon, LayerWorkspaceMgr workspaceMgr) {
            Pair<Gradient, INDArray> result = super.backpropGradient(epsilon, workspaceMgr);
            INDArray batch = input.castTo(dataType);
            INDArray unbiasedVariance = batch.var(true, batch.rank() == 4 ? NCHW_REDUCTION_DIMS : DENSE_REDUCTION_DIMS);
            INDArray runningVariance = getParam(BatchNormalizationParamInitializer.GLOBAL_VAR);
            // DL4J's form of running = decay * running + (1 - decay) * batch: the step subtracts this.
            gradientViews.get(BatchNormalizationParamInitializer.GLOBAL_VAR).assign(
                runningVariance.sub(unbiasedVariance.reshape(runningVariance.shape())).muli(1 - layerConf().getDecay()));
            return result;
        }
    }
}
