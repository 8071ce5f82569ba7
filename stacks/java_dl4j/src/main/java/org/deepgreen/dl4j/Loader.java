package org.deepgreen.dl4j;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Batches of one split in a given order, prepared by `workers` threads ahead of the loop that
 * consumes them (the specification's loader workers; as the C++ stack's Loader): at most
 * `workers` batches are in preparation at any time. A batch is the float32 NCHW tensor of
 * pixel / 255 (no normalisation), its one-hot labels and its labels.
 */
final class Loader implements AutoCloseable {
    /** The full scale of a uint8 pixel: inputs are pixel / 255, in [0, 1]. */
    private static final float PIXEL_FULL_SCALE = 255f;

    static final class Batch {
        final INDArray features;
        final INDArray oneHotLabels;
        final int[] labels;

        Batch(INDArray features, INDArray oneHotLabels, int[] labels) {
            this.features = features;
            this.oneHotLabels = oneHotLabels;
            this.labels = labels;
        }

        int size() {
            return labels.length;
        }
    }

    private final Store.Split split;
    private final int[] order;
    private final int batchSize;
    private final int classes;
    private final long batches;
    private final ExecutorService pool;
    private final Deque<Future<Batch>> pending = new ArrayDeque<>();
    private long scheduled;

    /** maxBatches <= 0: the whole split. */
    Loader(Store.Split split, int[] order, int batchSize, long maxBatches, int workers, int classes) {
        if (batchSize < 1) throw new StackError("batch size must be positive, is " + batchSize);
        this.split = split;
        this.order = order;
        this.batchSize = batchSize;
        this.classes = classes;
        long all = (order.length + (long) batchSize - 1) / batchSize;
        this.batches = maxBatches > 0 ? Math.min(all, maxBatches) : all;
        int threads = Math.max(1, workers);
        this.pool = Executors.newFixedThreadPool(threads, task -> {
            Thread thread = new Thread(task, "deepgreen-loader");
            thread.setDaemon(true);
            return thread;
        });
        while (pending.size() < threads && scheduled < batches) schedule();
    }

    /** The next batch, or null after the last. */
    Batch next() throws InterruptedException {
        Future<Batch> head = pending.poll();
        if (head == null) return null;
        if (scheduled < batches) schedule();
        try {
            return head.get();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) throw (RuntimeException) cause;
            throw new IllegalStateException(cause);
        }
    }

    @Override
    public void close() {
        pool.shutdownNow();
    }

    private void schedule() {
        int start = Math.toIntExact(scheduled++ * batchSize);
        int end = Math.min(start + batchSize, order.length);
        pending.add(pool.submit(() -> prepare(start, end)));
    }

    private Batch prepare(int start, int end) {
        int n = end - start;
        int side = split.side;
        int plane = side * side;
        int image = plane * Store.CHANNELS;
        float[] features = new float[n * image];
        float[] oneHot = new float[n * classes];
        int[] labels = new int[n];
        for (int i = 0; i < n; i++) {
            int index = order[start + i];
            long source = (long) index * image;
            for (int pixel = 0; pixel < plane; pixel++) {
                for (int c = 0; c < Store.CHANNELS; c++) {
                    int value = split.pixels[(int) (source + (long) pixel * Store.CHANNELS + c)] & 0xFF;
                    features[i * image + c * plane + pixel] = value / PIXEL_FULL_SCALE;
                }
            }
            labels[i] = split.labels[index];
            if (labels[i] >= classes) throw new StackError("label " + labels[i] + " of image " + index + " >= classes " + classes);
            oneHot[i * classes + labels[i]] = 1;
        }
        return new Batch(Nd4j.create(features, new long[] {n, Store.CHANNELS, side, side}, 'c'),
            Nd4j.create(oneHot, new long[] {n, classes}, 'c'), labels);
    }
}
