package org.deepgreen.dl4j;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * The canonical data store (deepgreen_audit/stacks/data.py): {@code <data_dir>/<dataset>/train.npz},
 * {@code test.npz} (np.savez: a ZIP of .npy arrays x, uint8 N x S x S x 3, and y, little-endian
 * int64) and {@code manifest.json}. The fingerprint is recomputed over the bytes read (train x,
 * train y, test x, test y) and must equal the manifest's.
 */
final class Store {
    /** One split: pixels in the file's NHWC order, labels as ints. */
    static final class Split {
        final byte[] pixels;
        final int[] labels;
        final int side;

        Split(byte[] pixels, int[] labels, int side) {
            this.pixels = pixels;
            this.labels = labels;
            this.side = side;
        }

        int count() {
            return labels.length;
        }
    }

    static final int CHANNELS = 3;
    private static final byte[] NPY_MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
    private static final int LABEL_BYTES = Long.BYTES;

    final Split train;
    final Split test;
    final String fingerprint;

    private Store(Split train, Split test, String fingerprint) {
        this.train = train;
        this.test = test;
        this.fingerprint = fingerprint;
    }

    /** Side of the stored images in pixels (the run's input resolution). */
    int sidePx() {
        return train.side;
    }

    static Store load(Path dataDir, String dataset) throws IOException {
        Path folder = dataDir.resolve(dataset);
        Path manifestPath = folder.resolve("manifest.json");
        if (!Files.isRegularFile(manifestPath)) {
            throw new StackError(manifestPath + ": missing (prepare the store with 'deepgreen data prepare')");
        }
        String expected = Json.MAPPER.readTree(manifestPath.toFile()).path("fingerprint_sha256").asText("");
        MessageDigest sha = Sha256.digest();
        Split train = readSplit(folder.resolve("train.npz"), sha);
        Split test = readSplit(folder.resolve("test.npz"), sha);
        String fingerprint = Sha256.hex(sha.digest());
        if (!fingerprint.equals(expected)) {
            throw new StackError(folder + ": pixels and labels have fingerprint " + fingerprint
                + ", the manifest says " + expected);
        }
        if (train.side != test.side) throw new StackError(folder + ": train and test images differ in size");
        return new Store(train, test, fingerprint);
    }

    private static Split readSplit(Path path, MessageDigest sha) throws IOException {
        if (!Files.isRegularFile(path)) throw new StackError(path + ": missing (prepare it with 'deepgreen data prepare')");
        try (ZipFile zip = new ZipFile(path.toFile())) {
            Npy x = Npy.read(zip, "x.npy", path);
            Npy y = Npy.read(zip, "y.npy", path);
            if (!x.descr.equals("|u1") || x.shape.length != 4 || x.shape[3] != CHANNELS || x.shape[1] != x.shape[2]) {
                throw new StackError(path + ": x must be uint8 N x S x S x 3, is " + x.descr + " " + x.shapeText());
            }
            if (!y.descr.equals("<i8") || y.shape.length != 1 || y.shape[0] != x.shape[0]) {
                throw new StackError(path + ": y must be int64 with one label per image, is " + y.descr + " " + y.shapeText());
            }
            sha.update(x.data);
            sha.update(y.data);
            ByteBuffer labelBytes = ByteBuffer.wrap(y.data).order(ByteOrder.LITTLE_ENDIAN);
            int[] labels = new int[(int) y.shape[0]];
            for (int i = 0; i < labels.length; i++) {
                long label = labelBytes.getLong(i * LABEL_BYTES);
                if (label < 0 || label > Integer.MAX_VALUE) throw new StackError(path + ": label " + label + " out of range");
                labels[i] = (int) label;
            }
            return new Split(x.data, labels, (int) x.shape[1]);
        }
    }

    /** One .npy entry (format versions 1 to 3, C order). */
    private static final class Npy {
        private static final Pattern DESCR = Pattern.compile("'descr':\\s*'([^']*)'");
        private static final Pattern FORTRAN = Pattern.compile("'fortran_order':\\s*(True|False)");
        private static final Pattern SHAPE = Pattern.compile("'shape':\\s*\\(([^)]*)\\)");

        final String descr;
        final long[] shape;
        final byte[] data;

        private Npy(String descr, long[] shape, byte[] data) {
            this.descr = descr;
            this.shape = shape;
            this.data = data;
        }

        String shapeText() {
            return Arrays.toString(shape);
        }

        static Npy read(ZipFile zip, String name, Path path) throws IOException {
            ZipEntry entry = zip.getEntry(name);
            if (entry == null) throw new StackError(path + ": has no array " + name);
            try (InputStream in = zip.getInputStream(entry)) {
                byte[] magic = in.readNBytes(NPY_MAGIC.length + 2);
                if (magic.length != NPY_MAGIC.length + 2 || !Arrays.equals(magic, 0, NPY_MAGIC.length, NPY_MAGIC, 0, NPY_MAGIC.length)) {
                    throw new StackError(path + ": " + name + " is not a .npy array");
                }
                int major = magic[NPY_MAGIC.length];
                byte[] lengthBytes = in.readNBytes(major == 1 ? Short.BYTES : Integer.BYTES);
                ByteBuffer length = ByteBuffer.wrap(lengthBytes).order(ByteOrder.LITTLE_ENDIAN);
                int headerLength = major == 1 ? Short.toUnsignedInt(length.getShort()) : length.getInt();
                String header = new String(in.readNBytes(headerLength), StandardCharsets.ISO_8859_1);
                Matcher descr = DESCR.matcher(header);
                Matcher fortran = FORTRAN.matcher(header);
                Matcher shapeText = SHAPE.matcher(header);
                if (!descr.find() || !fortran.find() || !shapeText.find()) {
                    throw new StackError(path + ": " + name + " has an unreadable .npy header");
                }
                if (fortran.group(1).equals("True")) throw new StackError(path + ": " + name + " is Fortran-ordered");
                long[] shape = Arrays.stream(shapeText.group(1).split(","))
                    .map(String::trim).filter(s -> !s.isEmpty()).mapToLong(Long::parseLong).toArray();
                long count = 1;
                for (long d : shape) count = Math.multiplyExact(count, d);
                long itemBytes = descr.group(1).equals("<i8") ? LABEL_BYTES : 1;
                long bytes = Math.multiplyExact(count, itemBytes);
                if (bytes > Integer.MAX_VALUE - Short.MAX_VALUE) {
                    throw new StackError(path + ": " + name + " holds " + bytes + " bytes, more than one Java array can");
                }
                byte[] data = in.readNBytes((int) bytes);
                if (data.length != bytes) throw new StackError(path + ": " + name + " is truncated");
                return new Npy(descr.group(1), shape, data);
            }
        }
    }
}
