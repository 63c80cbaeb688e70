package dev.svc.android

import java.io.BufferedReader
import java.io.File
import java.io.InputStreamReader
import java.net.ServerSocket
import java.nio.file.Files
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

/**
 * The real Svc server (`node --import tsx packages/server/src/main.ts`), started once per test JVM on a
 * free loopback port with a fresh DATA_DIR, and the keys of the project it creates on first start.
 */
class TestServer private constructor(
    val baseUrl: String,
    val projectId: String,
    val clientKey: String,
    val serverKey: String,
    private val process: Process,
    private val dataDir: File,
) {
    fun stop() {
        process.destroy()
        if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly()
        dataDir.deleteRecursively()
    }

    companion object {
        /** The departure grace period the tests run with (short, so that a full rejoin is quick to provoke). */
        const val GRACE_MS = 4_000L

        val shared: TestServer by lazy {
            start(mapOf("SVC_MEDIA" to "off")).also { server -> Runtime.getRuntime().addShutdownHook(Thread { server.stop() }) }
        }

        fun freePort(): Int = ServerSocket(0).use { it.localPort }

        /** A server with [env] on top of the test defaults. */
        fun start(env: Map<String, String>): TestServer {
            val root = File(System.getProperty("svc.repoRoot") ?: "../..").canonicalFile
            val dataDir = Files.createTempDirectory("svc-android-test").toFile()
            val port = freePort()
            val builder = ProcessBuilder("node", "--import", "tsx", "packages/server/src/main.ts")
                .directory(root)
                .redirectErrorStream(true)
            builder.environment().apply {
                // The embedded default (SQLite in DATA_DIR, in-process state), whatever CI exports.
                remove("DATABASE_URL")
                remove("REDIS_URL")
                put("PORT", port.toString())
                put("HOST", "127.0.0.1")
                put("DATA_DIR", dataDir.path)
                put("SVC_PUBLIC_URL", "http://127.0.0.1:$port")
                put("LOG_LEVEL", "warn")
                put("SVC_REALTIME_SWEEP_INTERVAL_MS", "50")
                put("SVC_REALTIME_DEPARTURE_GRACE_MS", GRACE_MS.toString())
                put("SVC_REALTIME_HANDSHAKE_TIMEOUT_MS", "5000")
                // The room controller's network quality, measured often enough for a test to see it.
                put("SVC_REALTIME_QUALITY_INTERVAL_MS", "300")
                putAll(env)
            }
            val process = builder.start()
            val keys = CompletableFuture<Map<String, String>>()
            val output = StringBuilder()
            Thread {
                val found = HashMap<String, String>()
                BufferedReader(InputStreamReader(process.inputStream)).forEachLine { line ->
                    synchronized(output) { output.appendLine(line) }
                    Regex("^\\s+(project id|client key|server key):\\s+(\\S+)").find(line)?.let {
                        found[it.groupValues[1]] = it.groupValues[2]
                    }
                    if (found.size == 3) keys.complete(HashMap(found))
                }
                keys.completeExceptionally(IllegalStateException("the server exited:\n$output"))
            }.apply { isDaemon = true }.start()
            val k = try {
                keys.get(60, TimeUnit.SECONDS)
            } catch (e: Exception) {
                process.destroyForcibly()
                throw IllegalStateException("the server did not start:\n${synchronized(output) { output }}", e)
            }
            return TestServer(
                "http://127.0.0.1:$port",
                k.getValue("project id"),
                k.getValue("client key"),
                k.getValue("server key"),
                process,
                dataDir,
            )
        }
    }
}
