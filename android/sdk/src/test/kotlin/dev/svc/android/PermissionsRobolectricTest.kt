package dev.svc.android

import android.Manifest
import android.app.Application
import android.content.Context
import androidx.test.core.app.ApplicationProvider
import com.sun.net.httpserver.HttpServer
import java.net.InetAddress
import java.net.InetSocketAddress
import java.util.concurrent.CopyOnWriteArrayList
import kotlinx.coroutines.runBlocking
import org.junit.After
import org.junit.Assert.assertEquals
import org.junit.Assert.assertTrue
import org.junit.Assert.fail
import org.junit.Before
import org.junit.Test
import org.junit.runner.RunWith
import org.robolectric.RobolectricTestRunner
import org.robolectric.Shadows.shadowOf
import org.robolectric.annotation.Config

/** The public constructor with a real Android Context: runtime permissions and the app's package name. */
@RunWith(RobolectricTestRunner::class)
@Config(manifest = Config.NONE, sdk = [34])
class PermissionsRobolectricTest {
    private lateinit var context: Context
    private lateinit var http: HttpServer
    private val requests = CopyOnWriteArrayList<Pair<String, String?>>()

    @Before
    fun setUp() {
        context = ApplicationProvider.getApplicationContext()
        // A loopback HTTP server that records each request's path and X-Bundle-Id, and answers with a room.
        http = HttpServer.create(InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0)
        http.createContext("/") { exchange ->
            requests += exchange.requestURI.path to exchange.requestHeaders.getFirst("X-Bundle-Id")
            val body = """{"roomName":"r1","liveType":"VIDEO_CALL","status":"IDLE","maxParticipants":2,"numParticipants":0,
                |"canJoinWithNoHost":true,"metadata":null,"createdAt":"2026-11-27T07:00:00.000Z"}
            """.trimMargin().toByteArray()
            exchange.responseHeaders.add("Content-Type", "application/json")
            exchange.sendResponseHeaders(200, body.size.toLong())
            exchange.responseBody.use { it.write(body) }
        }
        http.start()
    }

    @After
    fun tearDown() = http.stop(0)

    private fun client(bundleId: String? = null) =
        SvcClient(context, SvcConfig("prj_1", "svc_pk_test", baseUrl = "http://127.0.0.1:${http.address.port}", bundleId = bundleId))

    @Test
    fun connectWithoutPermissionsFailsBeforeAnyNetworkCall() = runBlocking {
        val client = client()
        try {
            client.connect(roomOptions("r1", "u1"))
            fail("connect must refuse without CAMERA and RECORD_AUDIO")
        } catch (e: SvcPermissionException) {
            assertEquals(listOf(Manifest.permission.CAMERA, Manifest.permission.RECORD_AUDIO), e.missingPermissions)
            assertEquals("permission_denied", e.code)
        }
        assertTrue("no request reached the server: $requests", requests.isEmpty())
        assertEquals(SvcConnectionState.DISCONNECTED, client.connectionState.value)

        shadowOf(context as Application).grantPermissions(Manifest.permission.CAMERA)
        try {
            client.connect(roomOptions("r1", "u1"))
            fail("RECORD_AUDIO is still missing")
        } catch (e: SvcPermissionException) {
            assertEquals(listOf(Manifest.permission.RECORD_AUDIO), e.missingPermissions)
        }
        assertTrue(requests.isEmpty())

        // With both, connect goes to the network: the token request reaches the server.
        shadowOf(context as Application).grantPermissions(Manifest.permission.RECORD_AUDIO)
        try {
            client.connect(roomOptions("r1", "u1"))
            fail("the fake server answers a room, not a token")
        } catch (e: SvcException) {
            assertEquals("invalid_response", e.code)
        }
        assertEquals("/v1/realtime/token", requests.single().first)
        assertEquals(SvcConnectionState.FAILED, client.connectionState.value)
    }

    @Test
    fun controllerSingletonBindsToTheClientAndReadsTheSystemAccessibility() {
        val client = client()
        val controller = SvcRoomController.instance.initialize(client, context)
        assertTrue(controller === SvcRoomController.instance && controller.isInitialized)
        controller.pin("u2")
        assertEquals("one mirror per client", listOf("u2"), client.controller.state.value.pinned)
        assertEquals(SvcAccessibilitySettings(captions = false, screenReader = false), controller.systemAccessibilitySettings())
        android.provider.Settings.Secure.putInt(context.contentResolver, "accessibility_captioning_enabled", 1)
        assertEquals(true, controller.systemAccessibilitySettings().captions)
    }

    @Test
    fun bundleIdIsThePackageNameUnlessOverridden() = runBlocking {
        assertEquals("r1", client().getRoom("r1").roomName)
        assertEquals(context.packageName, requests.last().second)
        client(bundleId = "com.example.other").getRoom("r1")
        assertEquals("com.example.other", requests.last().second)
        assertEquals("/v1/realtime/rooms/r1", requests.last().first)
    }
}
