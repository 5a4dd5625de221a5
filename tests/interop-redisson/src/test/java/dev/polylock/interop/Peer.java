package dev.polylock.interop;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A polylock holder in another process: {@code core/examples/peer.rs}, driven one command per
 * line. Every read of a reply is bounded, so a test never hangs on the peer.
 */
final class Peer implements AutoCloseable {
    /** Bound for commands that should answer at once. */
    static final Duration QUICK = Duration.ofSeconds(10);

    private final Process process;
    private final Writer stdin;
    private final BlockingQueue<String> replies = new LinkedBlockingQueue<>();
    private final Path stderr;
    private final String clientId;

    private Peer(Process process, Path stderr) throws InterruptedException {
        this.process = process;
        this.stderr = stderr;
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        Thread reader = new Thread(() -> {
            try (BufferedReader out = new BufferedReader(new InputStreamReader(
                    process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = out.readLine()) != null) {
                    replies.add(line);
                }
            } catch (IOException ended) {
                // the peer exited
            }
        }, "polylock-peer-stdout");
        reader.setDaemon(true);
        reader.start();
        String ready = awaitReply(QUICK);
        if (!ready.startsWith("ready ")) {
            fail("peer did not connect: " + ready + diagnostics());
        }
        this.clientId = ready.substring("ready ".length());
    }

    /** Starts the peer binary (system property {@code polylock.peer}) against {@code redisUrl}. */
    static Peer start(String redisUrl) throws IOException, InterruptedException {
        return start(redisUrl, List.of(), Map.of());
    }

    /** Starts a peer whose client renews held locks with this watchdog timeout. */
    static Peer start(String redisUrl, long watchdogTimeoutMs) throws IOException, InterruptedException {
        return start(redisUrl, List.of(String.valueOf(watchdogTimeoutMs)), Map.of());
    }

    /**
     * Starts a peer whose client keeps a fair waiter's place this long: it looks at the lock
     * again every half of it without a message, so a longer one makes a prompt wake-up the
     * message's doing.
     */
    static Peer startWithFairQueueTimeout(String redisUrl, Duration fairQueueTimeout)
            throws IOException, InterruptedException {
        return start(redisUrl, List.of(),
                Map.of("POLYLOCK_FAIR_QUEUE_TIMEOUT_MS", String.valueOf(fairQueueTimeout.toMillis())));
    }

    /**
     * Starts a peer whose client puts {@code keyPrefix} before every lock name (key_prefix), with
     * the fair queue timeout of {@link #startWithFairQueueTimeout} (a prompt wake-up is then a
     * message's doing).
     */
    static Peer startWithKeyPrefix(String redisUrl, String keyPrefix, Duration fairQueueTimeout)
            throws IOException, InterruptedException {
        return start(redisUrl, List.of(), Map.of("POLYLOCK_KEY_PREFIX", keyPrefix,
                "POLYLOCK_FAIR_QUEUE_TIMEOUT_MS", String.valueOf(fairQueueTimeout.toMillis())));
    }

    private static Peer start(String redisUrl, List<String> options, Map<String, String> environment)
            throws IOException, InterruptedException {
        Path binary = Path.of(System.getProperty("polylock.peer", "../../target/debug/examples/peer"));
        if (!Files.isExecutable(binary)) {
            fail("polylock peer not found at " + binary.toAbsolutePath()
                    + "; build it with `cargo build --example peer -p polylock`");
        }
        Path stderr = Files.createTempFile("polylock-peer-", ".log");
        List<String> command = new java.util.ArrayList<>(List.of(binary.toString(), redisUrl));
        command.addAll(options);
        ProcessBuilder builder = new ProcessBuilder(command).redirectError(stderr.toFile());
        builder.environment().putAll(environment);
        Process process = builder.start();
        return new Peer(process, stderr);
    }

    /** The peer's client id (a UUID), the first half of every owner it writes. */
    String clientId() {
        return clientId;
    }

    /** Sends one command without waiting for its reply (for commands that block). */
    void send(String command) throws IOException {
        stdin.write(command + "\n");
        stdin.flush();
    }

    /** The next reply line; fails the test if none arrives within {@code timeout}. */
    String awaitReply(Duration timeout) throws InterruptedException {
        String reply = replies.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (reply == null) {
            fail("no reply from the polylock peer within " + timeout + diagnostics());
        }
        return reply;
    }

    /** The next reply line if one arrives within {@code timeout}, else null. */
    String pollReply(Duration timeout) throws InterruptedException {
        return replies.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Sends a command that answers at once and returns its reply line. */
    String call(String command) throws IOException, InterruptedException {
        send(command);
        return awaitReply(QUICK);
    }

    private String diagnostics() {
        String alive = process.isAlive() ? "running" : "exited with " + process.exitValue();
        String log;
        try {
            log = Files.readString(stderr);
        } catch (IOException e) {
            log = "(stderr unreadable: " + e + ")";
        }
        return "\n  peer process: " + alive + "\n  peer stderr: " + log;
    }

    @Override
    public void close() throws InterruptedException {
        try {
            send("quit");
        } catch (IOException alreadyGone) {
            // the peer has exited already
        }
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            // It may be blocked in an acquire that the test abandoned.
            process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
        }
        try {
            Files.deleteIfExists(stderr);
        } catch (IOException ignored) {
            // a leftover log is harmless
        }
    }
}
