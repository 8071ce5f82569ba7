package org.deepgreen.dl4j;

import java.util.HashMap;
import java.util.Map;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.learning.GradientUpdater;
import org.nd4j.linalg.learning.config.IUpdater;
import org.nd4j.linalg.ops.transforms.Transforms;
import org.nd4j.linalg.schedule.ISchedule;

/**
 * Adam with torch.optim.Adam's update rule, as a DL4J updater. DL4J's own Adam adds epsilon to
 * sqrt(v) and folds the bias corrections into the step size, which is Keras' placement;
 * PyTorch's is, per step t, with the (already batch-averaged, weight-decayed) gradient g:
 * <pre>
 *   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
 *   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * </pre>
 * Betas and epsilon are {@link Conventions}; the learning rate comes from the job. Weight decay
 * (PyTorch's coupled L2) is added to the gradient before this runs, by {@link CoupledWeightDecay}.
 */
final class TorchAdam implements IUpdater {
    private static final String M_STATE = "M";
    private static final String V_STATE = "V";

    private final double learningRate;

    TorchAdam(double learningRate) {
        this.learningRate = learningRate;
    }

    @Override
    public long stateSize(long numParams) {
        return 2 * numParams;
    }

    @Override
    public GradientUpdater<TorchAdam> instantiate(INDArray viewArray, boolean initializeViewArray) {
        if (initializeViewArray) viewArray.assign(0);
        INDArray flat = viewArray.reshape(viewArray.length());
        long half = flat.length() / 2;
        return new Updater(this, flat.get(NDArrayIndex.interval(0, half)), flat.get(NDArrayIndex.interval(half, flat.length())));
    }

    @Override
    public GradientUpdater<TorchAdam> instantiate(Map<String, INDArray> updaterState, boolean initializeStateArrays) {
        Updater updater = new Updater(this, null, null);
        updater.setState(updaterState, initializeStateArrays);
        return updater;
    }

    @Override
    public TorchAdam clone() {
        return new TorchAdam(learningRate);
    }

    @Override
    public double getLearningRate(int iteration, int epoch) {
        return learningRate;
    }

    @Override
    public boolean hasLearningRate() {
        return true;
    }

    @Override
    public void setLrAndSchedule(double lr, ISchedule lrSchedule) {
        throw new UnsupportedOperationException("the learning rate is fixed by the job (lr_schedule=none)");
    }

    /** DL4J groups parameters whose updater configurations are equal into one block. */
    @Override
    public boolean equals(Object other) {
        return other instanceof TorchAdam && ((TorchAdam) other).learningRate == learningRate;
    }

    @Override
    public int hashCode() {
        return Double.hashCode(learningRate);
    }

    /** The state and the update of one block of parameters (flat views of DL4J's updater state). */
    private static final class Updater implements GradientUpdater<TorchAdam> {
        private final TorchAdam config;
        private INDArray m;
        private INDArray v;

        Updater(TorchAdam config, INDArray m, INDArray v) {
            this.config = config;
            this.m = m;
            this.v = v;
        }

        @Override
        public TorchAdam getConfig() {
            return config;
        }

        @Override
        public void setState(Map<String, INDArray> stateMap, boolean initialize) {
            if (!stateMap.containsKey(M_STATE) || !stateMap.containsKey(V_STATE)) {
                throw new IllegalStateException("Adam's state needs " + M_STATE + " and " + V_STATE);
            }
            m = stateMap.get(M_STATE);
            v = stateMap.get(V_STATE);
            if (initialize) {
                m.assign(0);
                v.assign(0);
            }
        }

        @Override
        public Map<String, INDArray> getState() {
            Map<String, INDArray> state = new HashMap<>();
            state.put(M_STATE, m);
            state.put(V_STATE, v);
            return state;
        }

        @Override
        public void setStateViewArray(INDArray viewArray, long[] gradientShape, char gradientOrder, boolean initialize) {
            Updater fresh = (Updater) config.instantiate(viewArray, initialize);
            m = fresh.m;
            v = fresh.v;
        }

        /** Turns the gradient, in place, into the step DL4J subtracts from the parameters. */
        @Override
        public void applyUpdater(INDArray gradient, int iteration, int epoch) {
            if (gradient.rank() != 1 || gradient.length() != m.length()) {
                throw new IllegalStateException("expected the flat gradient view of the updater block");
            }
            INDArray g = gradient;
            int step = iteration + 1; // DL4J counts iterations from 0, PyTorch's steps from 1
            double biasCorrection1 = 1 - Math.pow(Conventions.ADAM_BETA1, step);
            double biasCorrection2Sqrt = Math.sqrt(1 - Math.pow(Conventions.ADAM_BETA2, step));
            m.muli(Conventions.ADAM_BETA1).addi(g.mul(1 - Conventions.ADAM_BETA1));
            v.muli(Conventions.ADAM_BETA2).addi(g.mul(g).muli(1 - Conventions.ADAM_BETA2));
            INDArray denominator = Transforms.sqrt(v, true).divi(biasCorrection2Sqrt).addi(Conventions.ADAM_EPSILON);
            g.assign(m).divi(denominator).muli(config.learningRate / biasCorrection1);
        }
    }
}
