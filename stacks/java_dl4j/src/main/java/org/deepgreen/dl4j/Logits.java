package org.deepgreen.dl4j;

import org.nd4j.linalg.api.ndarray.INDArray;

/** Cross-entropy and accuracy from logits, as torch.nn.functional.cross_entropy reads them. */
final class Logits {
    private Logits() {}

    /** Sum over the batch of log-sum-exp(z) - z[label] (log-softmax, in double precision). */
    static double crossEntropySum(INDArray logits, int[] labels) {
        float[][] rows = logits.toFloatMatrix();
        double total = 0;
        for (int i = 0; i < rows.length; i++) {
            double max = Double.NEGATIVE_INFINITY;
            for (float z : rows[i]) max = Math.max(max, z);
            double sum = 0;
            for (float z : rows[i]) sum += Math.exp(z - max);
            total += max + Math.log(sum) - rows[i][labels[i]];
        }
        return total;
    }

    /** How many rows have their largest logit (the first, on ties) at the label. */
    static int correct(INDArray logits, int[] labels) {
        float[][] rows = logits.toFloatMatrix();
        int right = 0;
        for (int i = 0; i < rows.length; i++) {
            int best = 0;
            for (int k = 1; k < rows[i].length; k++) if (rows[i][k] > rows[i][best]) best = k;
            if (best == labels[i]) right++;
        }
        return right;
    }
}
