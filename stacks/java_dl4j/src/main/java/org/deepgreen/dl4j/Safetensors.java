package org.deepgreen.dl4j;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.node.ArrayNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * The safetensors format, float32 only: an 8-byte little-endian header length, a JSON header
 * (name -> dtype, shape, data offsets; "__metadata__" -> strings), then the raw little-endian data.
 */
final class Safetensors {
    private Safetensors() {}

    private static final String METADATA = "__metadata__";
    private static final int HEADER_LENGTH_BYTES = Long.BYTES;
    /** The header is padded with spaces to a multiple of 8 bytes, as the reference writers do. */
    private static final int HEADER_ALIGNMENT = 8;
    private static final int WRITE_CHUNK_FLOATS = 1 << 20;

    /** A float32 tensor in PyTorch's layout: its shape and its values in C order. */
    static final class Tensor {
        final long[] shape;
        final float[] values;

        Tensor(long[] shape, float[] values) {
            long count = 1;
            for (long d : shape) count *= d;
            if (count != values.length) throw new IllegalArgumentException("shape does not match the value count");
            this.shape = shape;
            this.values = values;
        }
    }

    /** A file's tensors (in header order), its metadata, and the SHA-256 of its bytes. */
    static final class Contents {
        final Map<String, Tensor> tensors;
        final Map<String, String> metadata;
        final String sha256;

        Contents(Map<String, Tensor> tensors, Map<String, String> metadata, String sha256) {
            this.tensors = tensors;
            this.metadata = metadata;
            this.sha256 = sha256;
        }
    }

    static Contents read(Path path) throws IOException {
        if (!Files.isRegularFile(path)) {
            throw new StackError(path + ": missing (write the export with 'deepgreen data prepare')");
        }
        byte[] bytes = Files.readAllBytes(path);
        String sha256 = Sha256.of(bytes);
        ByteBuffer buffer = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        if (bytes.length < HEADER_LENGTH_BYTES) throw new StackError(path + ": not a safetensors file");
        long headerLength = buffer.getLong(0);
        if (headerLength < 0 || HEADER_LENGTH_BYTES + headerLength > bytes.length) {
            throw new StackError(path + ": truncated safetensors header");
        }
        int bodyStart = HEADER_LENGTH_BYTES + (int) headerLength;
        JsonNode header = Json.MAPPER.readTree(new String(bytes, HEADER_LENGTH_BYTES, (int) headerLength, StandardCharsets.UTF_8));
        Map<String, Tensor> tensors = new LinkedHashMap<>();
        Map<String, String> metadata = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> field = it.next();
            String name = field.getKey();
            JsonNode info = field.getValue();
            if (name.equals(METADATA)) {
                info.fields().forEachRemaining(m -> metadata.put(m.getKey(), m.getValue().asText()));
                continue;
            }
            if (!info.path("dtype").asText().equals("F32")) throw new StackError(path + ": " + name + " is not F32");
            JsonNode shapeNode = info.path("shape");
            long[] shape = new long[shapeNode.size()];
            for (int i = 0; i < shape.length; i++) shape[i] = shapeNode.get(i).asLong();
            long begin = info.path("data_offsets").path(0).asLong(-1);
            long end = info.path("data_offsets").path(1).asLong(-1);
            if (begin < 0 || end < begin || bodyStart + end > bytes.length) {
                throw new StackError(path + ": " + name + " lies outside the file");
            }
            long count = 1;
            for (long d : shape) count *= d;
            if (count * Float.BYTES != end - begin) throw new StackError(path + ": " + name + " has the wrong byte count");
            float[] values = new float[(int) count];
            buffer.slice(bodyStart + (int) begin, (int) (end - begin)).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(values);
            tensors.put(name, new Tensor(shape, values));
        }
        return new Contents(tensors, metadata, sha256);
    }

    static void write(Path path, Map<String, Tensor> tensors, Map<String, String> metadata) throws IOException {
        ObjectNode header = Json.MAPPER.createObjectNode();
        ObjectNode meta = header.putObject(METADATA);
        metadata.forEach(meta::put);
        long offset = 0;
        for (Map.Entry<String, Tensor> entry : tensors.entrySet()) {
            ObjectNode info = header.putObject(entry.getKey());
            info.put("dtype", "F32");
            ArrayNode shape = info.putArray("shape");
            for (long d : entry.getValue().shape) shape.add(d);
            long bytes = (long) entry.getValue().values.length * Float.BYTES;
            info.putArray("data_offsets").add(offset).add(offset + bytes);
            offset += bytes;
        }
        String json = Json.MAPPER.writeValueAsString(header);
        int jsonBytes = json.getBytes(StandardCharsets.UTF_8).length;
        int padding = (HEADER_ALIGNMENT - jsonBytes % HEADER_ALIGNMENT) % HEADER_ALIGNMENT;
        byte[] headerBytes = (json + " ".repeat(padding)).getBytes(StandardCharsets.UTF_8);
        try (FileChannel out = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer prefix = ByteBuffer.allocate(HEADER_LENGTH_BYTES + headerBytes.length).order(ByteOrder.LITTLE_ENDIAN);
            prefix.putLong(headerBytes.length).put(headerBytes).flip();
            writeFully(out, prefix);
            ByteBuffer chunk = ByteBuffer.allocate(WRITE_CHUNK_FLOATS * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
            for (Tensor tensor : tensors.values()) {
                for (int start = 0; start < tensor.values.length; start += WRITE_CHUNK_FLOATS) {
                    int n = Math.min(WRITE_CHUNK_FLOATS, tensor.values.length - start);
                    chunk.clear();
                    chunk.asFloatBuffer().put(tensor.values, start, n);
                    chunk.limit(n * Float.BYTES);
                    writeFully(out, chunk);
                }
            }
        }
    }

    private static void writeFully(FileChannel out, ByteBuffer buffer) throws IOException {
        while (buffer.hasRemaining()) out.write(buffer);
    }
}
