package org.deepgreen.dl4j;

import org.nd4j.shade.jackson.databind.ObjectMapper;

/** The JSON reader and writer: the Jackson that ND4J ships (shaded), so no second copy is needed. */
final class Json {
    private Json() {}

    static final ObjectMapper MAPPER = new ObjectMapper();
}
