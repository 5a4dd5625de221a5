package dev.polylock.interop;

import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real redis-server on a free loopback port, without persistence, started by the test kit's
 * launcher for every language ({@code polylock-testkit up single}, see docs/testing.md);
 * {@link #close()} closes the launcher's stdin, on which it stops the server and removes its
 * files (as it does when this JVM dies).
 */
final class RedisServer implements AutoCloseable {
    private static final long START_TIMEOUT_MS = 60_000;

    private final int port;
    private final Process launcher;
    private final BufferedReader replies;
    private Socket monitor;

    private RedisServer(int port, Process launcher, BufferedReader replies) {
        this.port = port;
        this.launcher = launcher;
        this.replies = replies;
    }

    /**
     * The launcher: system property {@code polylock.testkit}, else
     * {@code target/debug/polylock-testkit} above the working directory (built by
     * {@code cargo build -p polylock-testkit --bins}, as make test-interop does).
     */
    static String launcherProgram() {
        String configured = System.getProperty("polylock.testkit");
        if (configured != null && !configured.isEmpty()) {
            return configured;
        }
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("target/debug/polylock-testkit");
            if (Files.isExecutable(candidate)) {
                return candidate.toString();
            }
        }
        throw new IllegalStateException(
                "target/debug/polylock-testkit not found: run `cargo build -p polylock-testkit --bins`");
    }

    /**
     * The server binary: system property {@code redis.server}, else env POLYLOCK_REDIS_SERVER
     * (the server matrix sets it for every language's test kit), else redis-server from PATH.
     */
    static String serverProgram() {
        return System.getProperty("redis.server", envOr("POLYLOCK_REDIS_SERVER", "redis-server"));
    }

    /** The redis-cli that creates clusters: env POLYLOCK_REDIS_CLI, else redis-cli from PATH. */
    static String cliProgram() {
        return envOr("POLYLOCK_REDIS_CLI", "redis-cli");
    }

    /**
     * SSUBSCRIBE/SPUBLISH came with Redis 7.0 (every Valkey has them): what {@code <server>
     * --version} ({@code Redis server v=7.0.15 ...}, {@code Valkey server v=8.1.8 ...}) says.
     */
    static boolean hasShardedPubsub() {
        try {
            Process process = new ProcessBuilder(serverProgram(), "--version").redirectErrorStream(true).start();
            String line = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            process.waitFor();
            String version = line.replaceAll("(?s).*\\bv=([0-9]+)\\..*", "$1");
            return line.startsWith("Valkey") || Integer.parseInt(version) >= 7;
        } catch (IOException | NumberFormatException e) {
            throw new IllegalStateException("cannot tell the version of " + serverProgram(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static String envOr(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    /** Starts a server; retries on another port if the chosen one was taken meanwhile. */
    static RedisServer start() throws IOException, InterruptedException {
        return start(List.of());
    }

    /** Starts a server with extra {@code --option value} arguments (e.g. a cluster node's). */
    static RedisServer start(List<String> extra) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(launcherProgram(), "up", "single"));
        for (String argument : extra) {
            command.add("--arg=" + argument);
        }
        command.add("--json");
        ProcessBuilder builder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
        builder.environment().put("POLYLOCK_REDIS_SERVER", serverProgram());
        Process launcher = builder.start();
        BufferedReader replies = new BufferedReader(
                new InputStreamReader(launcher.getInputStream(), StandardCharsets.UTF_8));
        String description = readLine(replies, launcher);
        if (description == null) {
            throw new IllegalStateException("polylock-testkit up single failed (exit " + launcher.waitFor() + ")");
        }
        // One JSON line; the first node's port is all this needs (the suite has no JSON library).
        Matcher port = Pattern.compile("\"port\":(\\d+)").matcher(description);
        if (!port.find()) {
            throw new IllegalStateException("no port in " + description);
        }
        return new RedisServer(Integer.parseInt(port.group(1)), launcher, replies);
    }

    /** The launcher's next line, or null if it exited; gives up after START_TIMEOUT_MS. */
    private static String readLine(BufferedReader replies, Process launcher) throws InterruptedException {
        try {
            return CompletableFuture.supplyAsync(() -> {
                try {
                    return replies.readLine();
                } catch (IOException closed) {
                    return null;
                }
            }).get(START_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            launcher.destroyForcibly();
            throw new IllegalStateException("polylock-testkit did not answer", e);
        }
    }

    private Socket connect() throws IOException {
        Socket socket = new Socket();
        socket.connect(new InetSocketAddress("127.0.0.1", port), 1_000);
        socket.setSoTimeout(2_000);
        return socket;
    }

    int port() {
        return port;
    }

    /**
     * Runs one command on a new connection; the reply as a String (simple or bulk string), a
     * Long, a List of replies, or null. An error reply is thrown as an IOException.
     */
    Object command(Object... args) throws IOException {
        try (Socket socket = connect()) {
            ByteArrayOutputStream request = new ByteArrayOutputStream();
            request.writeBytes(("*" + args.length + "\r\n").getBytes(StandardCharsets.UTF_8));
            for (Object arg : args) {
                byte[] bytes = String.valueOf(arg).getBytes(StandardCharsets.UTF_8);
                request.writeBytes(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.UTF_8));
                request.writeBytes(bytes);
                request.writeBytes("\r\n".getBytes(StandardCharsets.UTF_8));
            }
            socket.getOutputStream().write(request.toByteArray());
            return readReply(new BufferedInputStream(socket.getInputStream()));
        }
    }

    private static Object readReply(InputStream in) throws IOException {
        int type = in.read();
        String line = readLine(in);
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new IOException(line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int length = Integer.parseInt(line);
                if (length < 0) {
                    return null;
                }
                byte[] bytes = in.readNBytes(length + 2); // the text and its CRLF
                return new String(bytes, 0, length, StandardCharsets.UTF_8);
            }
            case '*': {
                int count = Integer.parseInt(line);
                if (count < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    items.add(readReply(in));
                }
                return items;
            }
            default:
                throw new IOException("unexpected reply type " + type + ": " + line);
        }
    }

    private static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        int previous = -1;
        for (int next = in.read(); next != -1; next = in.read()) {
            if (previous == '\r' && next == '\n') {
                byte[] bytes = line.toByteArray();
                return new String(bytes, 0, bytes.length - 1, StandardCharsets.UTF_8);
            }
            line.write(next);
            previous = next;
        }
        throw new IOException("connection closed mid-reply");
    }

    String url() {
        return "redis://127.0.0.1:" + port;
    }

    /**
     * Records every command the server executes (MONITOR) into {@code file}, so that a failing
     * scenario shows exactly what Redisson and polylock each sent.
     */
    void recordCommands(Path file) throws IOException {
        Files.createDirectories(file.getParent());
        monitor = connect();
        monitor.setSoTimeout(0);
        OutputStream out = monitor.getOutputStream();
        out.write("MONITOR\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(
                monitor.getInputStream(), StandardCharsets.UTF_8));
        // The server acknowledges MONITOR before it reports anything; wait for that.
        String ack = in.readLine();
        if (!"+OK".equals(ack)) {
            throw new IOException("MONITOR was refused: " + ack);
        }
        Thread copier = new Thread(() -> {
            try (PrintWriter log = new PrintWriter(Files.newBufferedWriter(file))) {
                String line;
                while ((line = in.readLine()) != null) {
                    log.println(line.startsWith("+") ? line.substring(1) : line);
                    log.flush();
                }
            } catch (IOException closed) {
                // the server or the monitor socket was closed: the record ends here
            }
        }, "redis-monitor-" + port);
        copier.setDaemon(true);
        copier.start();
    }

    /** Kills the server at once, as a crash would (its directory stays until close). */
    void kill() throws IOException, InterruptedException {
        OutputStream control = launcher.getOutputStream();
        control.write("kill node0\n".getBytes(StandardCharsets.UTF_8));
        control.flush();
        String reply = readLine(replies, launcher);
        if (reply == null || !reply.contains("\"ok\":true")) {
            throw new IllegalStateException("polylock-testkit: kill node0: " + reply);
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (monitor != null) {
            try {
                monitor.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
        try {
            launcher.getOutputStream().close();
        } catch (IOException ignored) {
            // it exited already
        }
        if (!launcher.waitFor(30, TimeUnit.SECONDS)) {
            launcher.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
        }
    }
}
