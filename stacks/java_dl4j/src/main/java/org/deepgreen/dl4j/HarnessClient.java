package org.deepgreen.dl4j;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A client of the harness line protocol, version 1 (docs/protocol.md): one request line, one
 * reply line, in order; a reply other than "OK ..." ends the run.
 */
final class HarnessClient implements AutoCloseable {
    static final String STACK_NAME = "java-dl4j";
    private static final int PROTOCOL_VERSION = 1;
    /** How long a reply may take: the harness answers after one counter read and CodeCarbon's
     *  task start or stop (the reference client waits 10 s; a loaded host can be slower). */
    private static final int RECEIVE_TIMEOUT_MS = 60_000;
    private static final int CONNECT_TIMEOUT_MS = 10_000;
    private static final int ECHOED_REQUEST_CHARS = 80;

    private final Socket socket;
    private final BufferedReader in;
    private final OutputStream out;

    HarnessClient(int port) throws IOException {
        socket = new Socket();
        try {
            socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), CONNECT_TIMEOUT_MS);
        } catch (IOException e) {
            socket.close();
            throw new StackError("cannot connect to the harness on port " + port + ": " + e.getMessage());
        }
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(RECEIVE_TIMEOUT_MS);
        in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        out = socket.getOutputStream();
    }

    /** Sends one request and returns its reply after "OK "; any other reply is fatal. */
    String request(String line) throws IOException {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        String reply;
        try {
            reply = in.readLine();
        } catch (SocketTimeoutException e) {
            throw new StackError("the harness did not answer within " + RECEIVE_TIMEOUT_MS + " ms (for: "
                + abbreviated(line) + ")");
        }
        if (reply == null) throw new StackError("the harness closed the connection (for: " + abbreviated(line) + ")");
        if (!reply.startsWith("OK ")) throw new StackError("harness: " + reply + " (for: " + abbreviated(line) + ")");
        return reply.substring(3);
    }

    /** HELLO; returns the job's key=value pairs, decoded, in the order sent. */
    Map<String, String> hello() throws IOException {
        String[] tokens = request("HELLO " + PROTOCOL_VERSION + " " + STACK_NAME).split(" ");
        if (tokens.length < 2 || !tokens[0].equals("HELLO")) throw new StackError("harness: unexpected HELLO reply");
        Map<String, String> job = new LinkedHashMap<>();
        for (int i = 2; i < tokens.length; i++) {
            int eq = tokens[i].indexOf('=');
            if (eq <= 0) throw new StackError("harness: malformed job token " + tokens[i]);
            job.put(tokens[i].substring(0, eq), percentDecode(tokens[i].substring(eq + 1)));
        }
        return job;
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }

    private static String abbreviated(String line) {
        return line.length() <= ECHOED_REQUEST_CHARS ? line : line.substring(0, ECHOED_REQUEST_CHARS) + "...";
    }

    /** RFC 3986 percent-decoding of UTF-8 ('+' is a plus sign, unlike URLDecoder's form encoding). */
    static String percentDecode(String s) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        byte[] raw = s.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < raw.length; i++) {
            if (raw[i] == '%' && i + 2 < raw.length) {
                bytes.write(Integer.parseInt(new String(raw, i + 1, 2, StandardCharsets.US_ASCII), 16));
                i += 2;
            } else {
                bytes.write(raw[i]);
            }
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    /** RFC 3986 percent-encoding: unreserved characters as they are, every other UTF-8 byte as %XX. */
    static String percentEncode(String s) {
        StringBuilder out = new StringBuilder();
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            char c = (char) (b & 0xFF);
            boolean unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                || c == '-' || c == '.' || c == '_' || c == '~';
            if (unreserved) out.append(c);
            else out.append('%').append(String.format("%02X", b & 0xFF));
        }
        return out.toString();
    }
}
