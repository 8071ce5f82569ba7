package org.deepgreen.dl4j;

/**
 * PyTorch's numeric conventions and the two architectures' shapes, as
 * deepgreen_audit/stacks/conventions.py states them. These lie beneath the recipe (every
 * recipe number comes from the harness's HELLO); they are set explicitly because DL4J's
 * defaults differ or are expressed in other terms.
 */
final class Conventions {
    private Conventions() {}

    static final double BATCHNORM_EPSILON = 1e-5;
    /** PyTorch's momentum 0.1 in DL4J's terms: running = decay * running + (1 - decay) * batch. */
    static final double BATCHNORM_DECAY = 0.9;

    static final double ADAM_BETA1 = 0.9;
    static final double ADAM_BETA2 = 0.999;
    /** Added to sqrt(v_hat), after the bias correction (PyTorch), not to sqrt(v) (DL4J, Keras). */
    static final double ADAM_EPSILON = 1e-8;

    /** PyTorch's dropout probability p; DL4J's dropOut(x) takes the retain probability 1 - p. */
    static final double VGG_DROPOUT = 0.5;
    /** Side of VGG's adaptive average pool. */
    static final int VGG_POOL_SIDE = 7;
    static final int VGG16_HIDDEN = 4096;

    /** ResNet-18's stages: {output channels, stride of the first block}. */
    static final int[][] RESNET18_STAGES = {{64, 1}, {128, 2}, {256, 2}, {512, 2}}; // not-recipe: stage widths
    static final int RESNET18_BLOCKS_PER_STAGE = 2;
    static final int RESNET18_STEM_CHANNELS = 64;

    /** VGG-16's feature layers: output channels of a 3x3 convolution, or POOL (2x2/2 max-pool). */
    static final int POOL = -1;
    static final int[] VGG16_FEATURES = {64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, // not-recipe: widths
        512, 512, 512, POOL, 512, 512, 512, POOL};
}
