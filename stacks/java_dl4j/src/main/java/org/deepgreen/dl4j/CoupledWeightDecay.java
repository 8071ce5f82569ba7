package org.deepgreen.dl4j;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.learning.regularization.L2Regularization;

/**
 * torch.optim.Adam's weight_decay: the gradient becomes g + weight_decay * p before the Adam
 * step. DL4J's L2Regularization applies exactly that (before the updater, after the gradient is
 * averaged over the batch); this subclass only keeps the penalty out of the reported loss, as
 * PyTorch's loss does not contain it.
 */
final class CoupledWeightDecay extends L2Regularization {
    private final double coefficient;

    CoupledWeightDecay(double coefficient) {
        super(coefficient);
        this.coefficient = coefficient;
    }

    @Override
    public double score(INDArray param, int iteration, int epoch) {
        return 0;
    }

    @Override
    public CoupledWeightDecay clone() {
        return new CoupledWeightDecay(coefficient);
    }
}
