package polylock.test

import java.io.File
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.json.JSONArray
import org.json.JSONObject
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.CountDownLatch
import polylock.ExpirableSemaphore
import polylock.Lock
import polylock.LockException
import polylock.ReadWriteLock
import polylock.Semaphore

/** The cases of the conformance file [name] (tests/conformance/), which every binding runs. */
fun conformanceCases(name: String): List<JSONObject> {
    val root = System.getProperty("polylock.repo.root") ?: error("system property polylock.repo.root is not set")
    val cases = JSONObject(File(root, "tests/conformance/$name").readText()).getJSONArray("cases")
    return List(cases.length()) { cases.getJSONObject(it) }
}

/**
 * The behaviour cases every binding runs (tests/conformance/behaviour.json, whose "about"
 * describes the format), through Kotlin's suspending calls on a redis-server of its own: each
 * step's call, its result, or its `LockException` subclass (the core's kind) and message.
 * Kotlin's unit is the file's: milliseconds.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BehaviourTest {
    private lateinit var redis: RedisServer

    private val cases = conformanceCases("behaviour.json")

    @BeforeAll
    fun start() {
        redis = RedisServer.start()
    }

    @AfterAll
    fun stop() = redis.close()

    /** One case's clients and handles, and the results its steps saved. */
    private class Run(val case: JSONObject, redis: RedisServer) : AutoCloseable {
        val prefix = case.getString("name") + "/"
        val clients: Map<String, Client>
        val handles = mutableMapOf<String, Any>()
        val saved = mutableMapOf<String, Any?>()

        init {
            val names = case.getJSONArray("clients")
            clients = List(names.length()) { names.getString(it) }.associateWith { Client.connectBlocking(redis.url) }
            // One read-write lock per client and name: its read and write locks are one holder.
            val readWrite = mutableMapOf<Pair<String, String>, ReadWriteLock>()
            val declared = case.getJSONObject("handles")
            for (id in declared.keySet()) {
                val handle = declared.getJSONObject(id)
                val client = clients.getValue(handle.getString("client"))
                val name = prefix + handle.getString("name")
                val rw = { readWrite.getOrPut(handle.getString("client") to name) { client.readWriteLock(name) } }
                handles[id] = when (handle.getString("kind")) {
                    "lock" -> client.lock(name)
                    "fair_lock" -> client.fairLock(name)
                    "fifo_lock" -> client.fifoLock(name)
                    "fenced_lock" -> client.fencedLock(name)
                    "read_lock" -> rw().readLock()
                    "write_lock" -> rw().writeLock()
                    "semaphore" -> client.semaphore(name)
                    "expirable_semaphore" -> client.expirableSemaphore(name)
                    "count_down_latch" -> client.countDownLatch(name)
                    else -> error("unknown kind in $handle")
                }
            }
            handles.putAll(clients)
            // The `redis` steps look at what the calls wrote.
            handles["redis"] = redis
        }

        /** The step's argument, a saved result where it is `$x`. */
        fun arg(args: JSONObject, name: String): Any? = when (val value = args.opt(name)) {
            is String -> if (value.startsWith("$")) saved.getValue(value.drop(1)) else value
            JSONObject.NULL -> null
            else -> value
        }

        fun long(args: JSONObject, name: String): Long? = (arg(args, name) as Number?)?.toLong()

        fun int(args: JSONObject, name: String): Int = Math.toIntExact(long(args, name) ?: 1)

        /** The call's result as the file writes it: Long for a number, null for nothing. */
        suspend fun call(step: JSONObject): Any? {
            val args = step.optJSONObject("args") ?: JSONObject()
            val call = step.getString("call")
            val result: Any? = when (val target = handles.getValue(step.getString("on"))) {
                is Lock -> when (call) {
                    "acquire" -> target.acquire(long(args, "wait_ms"), long(args, "lease_ms"))
                    "release" -> target.release()
                    "is_locked" -> target.isLocked()
                    "is_held" -> target.isHeld()
                    "hold_count" -> target.holdCount()
                    "force_unlock" -> target.forceUnlock()
                    "token" -> target.token()
                    "remaining_lease" -> target.remainingLeaseMs()
                    else -> error("no call $call on a lock")
                }
                is Semaphore -> when (call) {
                    "try_set_permits" -> target.trySetPermits(int(args, "permits"))
                    "add_permits" -> target.addPermits(int(args, "permits"))
                    "available_permits" -> target.availablePermits()
                    "acquire" -> target.acquire(int(args, "permits"), long(args, "wait_ms"))
                    "release" -> target.release(int(args, "permits"))
                    else -> error("no call $call on a semaphore")
                }
                is ExpirableSemaphore -> when (call) {
                    "try_set_permits" -> target.trySetPermits(int(args, "permits"))
                    "add_permits" -> target.addPermits(int(args, "permits"))
                    "available_permits" -> target.availablePermits()
                    "acquire" -> target.acquire(long(args, "wait_ms"), long(args, "lease_ms"))
                    "release" -> target.release(arg(args, "permit_id") as String)
                    "held_permits" -> target.heldPermits()
                    else -> error("no call $call on an expirable semaphore")
                }
                is CountDownLatch -> when (call) {
                    "try_set_count" -> target.trySetCount(long(args, "count")!!)
                    "count_down" -> target.countDown()
                    "count" -> target.count()
                    "await_zero" -> target.awaitZero(long(args, "timeout_ms")!!)
                    "delete" -> target.delete()
                    else -> error("no call $call on a latch")
                }
                is Client -> {
                    val key = prefix + args.getString("key")
                    when (call) {
                        "fenced_set" -> target.fencedSet(key, (arg(args, "value") as String).toByteArray(), long(args, "token")!!)
                        "fenced_delete" -> target.fencedDelete(key, long(args, "token")!!)
                        else -> error("no call $call on a client")
                    }
                }
                is RedisServer -> {
                    check(call == "command") { "no call $call on redis" }
                    val words = args.getJSONArray("command")
                    target.command(*Array(words.length()) { message(words.getString(it)) })
                }
                else -> error("unknown handle $target")
            }
            return when (result) {
                is Unit -> null
                is Int -> result.toLong()
                else -> result
            }
        }

        /**
         * A message or a `redis` step's word as the file writes it: `{case}` is the case's name,
         * `{owner:h}` handle h's owner, `{$x}` the result saved as x.
         */
        fun message(template: String): String {
            var message = template.replace("{case}", case.getString("name"))
            for ((id, handle) in handles) {
                if (handle is Lock) message = message.replace("{owner:$id}", handle.owner())
            }
            for ((name, value) in saved) message = message.replace("{\$$name}", value.toString())
            return message
        }

        /** Whether [actual] is what [expected] (a value or a matcher) asks for. */
        fun matches(expected: Any?, actual: Any?): Boolean {
            if (expected !is JSONObject) {
                return when (expected) {
                    JSONObject.NULL -> actual == null
                    is Number -> actual is Long && actual == expected.toLong()
                    else -> actual == expected
                }
            }
            val matcher = expected.keys().next()
            val operand = expected.get(matcher)
            fun value(operand: Any?): Long = ((if (operand is String) saved.getValue(operand.drop(1)) else operand) as Number).toLong()
            return when (matcher) {
                "between" -> actual is Long && value((operand as JSONArray).get(0)) <= actual && actual <= value(operand.get(1))
                "at_least" -> actual is Long && actual >= value(operand)
                "greater_than" -> actual is Long && actual > value(operand)
                "matches" -> actual is String && Regex(operand as String).containsMatchIn(actual)
                "length" -> actual is List<*> && actual.size == (operand as Number).toInt()
                else -> error("unknown matcher $matcher")
            }
        }

        override fun close() {
            for (client in clients.values) {
                client.shutdown()
                client.close()
            }
        }
    }

    @TestFactory
    fun `the behaviour cases`(): List<DynamicTest> = cases.map { case ->
        DynamicTest.dynamicTest(case.getString("name")) {
            Run(case, redis).use { run ->
                val steps = case.getJSONArray("steps")
                for (index in 0 until steps.length()) {
                    val step = steps.getJSONObject(index)
                    val at = "${case.getString("name")} step $index: $step"
                    if (step.has("error")) {
                        val expected = step.getJSONObject("error")
                        val failure = expectThrows<LockException> { runBlocking { run.call(step) } }
                        // The case's kind is the name of the LockException subclass.
                        assertEquals(expected.getString("kind"), failure::class.simpleName, "$at gave $failure")
                        assertEquals(run.message(expected.getString("message")), failure.message, at)
                        continue
                    }
                    val actual = runBlocking { run.call(step) }
                    assertTrue(run.matches(step.get("result"), actual), "$at: got $actual")
                    if (step.has("save")) run.saved[step.getString("save")] = actual
                }
            }
        }
    }
}
