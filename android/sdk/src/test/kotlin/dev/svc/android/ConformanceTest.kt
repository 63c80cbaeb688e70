package dev.svc.android

import dev.svc.android.internal.CONTROLLER_EVENTS
import dev.svc.android.internal.CONTROLLER_REQUESTS
import dev.svc.android.internal.ClientFrame
import dev.svc.android.internal.ControllerMirror
import dev.svc.android.internal.ControllerSnapshot
import dev.svc.android.internal.EventFrame
import dev.svc.android.internal.MediaSnapshot
import dev.svc.android.internal.MessageSendData
import dev.svc.android.internal.ParticipantList
import dev.svc.android.internal.RoomSnapshot
import dev.svc.android.internal.SendMessageBody
import dev.svc.android.internal.SendMessageResult
import dev.svc.android.internal.SessionResumeData
import dev.svc.android.internal.UpdateMetadataData
import dev.svc.android.internal.WireJson
import dev.svc.android.internal.decodeServerFrame
import dev.svc.android.internal.encodeServerFrame
import java.io.File
import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.boolean
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory

/**
 * The one contract: every vector of packages/protocol/vectors/realtime.json and controller-events.json
 * (also held against the TypeScript side by packages/client/test/conformance.test.ts). A valid vector
 * must parse into the library's types and serialize back to the same JSON (a field the Kotlin types
 * lack or rename fails here); an invalid one must be refused. controller-requests.json: the library
 * writes every valid request `data` exactly, and cannot write an invalid one. controller-mirror.json:
 * the controller's mirror reaches the expected state from the snapshot and events.
 */
class ConformanceTest {
    private val dir = File(System.getProperty("svc.vectorsDir") ?: "../../packages/protocol/vectors")
    private val file = File(dir, "realtime.json")

    private val rest: Map<String, KSerializer<*>> = mapOf(
        "SvcUser" to SvcUser.serializer(),
        "SvcRoomOptions" to SvcRoomOptions.serializer(),
        "SvcCreateRoomOptions" to SvcCreateRoomOptions.serializer(),
        "SvcRoomInfo" to SvcRoomInfo.serializer(),
        "SvcParticipantInfo" to SvcParticipant.serializer(),
        "SvcRoomList" to SvcRoomPage.serializer(),
        "SvcParticipantList" to ParticipantList.serializer(),
        "SvcTokenResponse" to SvcTokenResponse.serializer(),
        "SendMessageBody" to SendMessageBody.serializer(),
        "SendMessageResult" to SendMessageResult.serializer(),
    )

    /** The `data` the library writes for each request type. */
    private val clientData: Map<String, KSerializer<*>> = mapOf(
        "session.join" to JsonObject.serializer(),
        "session.leave" to JsonObject.serializer(),
        "ping" to JsonObject.serializer(),
        "session.resume" to SessionResumeData.serializer(),
        "message.send" to MessageSendData.serializer(),
        "room.update_metadata" to UpdateMetadataData.serializer(),
        "media.publish" to dev.svc.android.internal.MediaPublishData.serializer(),
        "media.unpublish" to dev.svc.android.internal.MediaTrackIdData.serializer(),
        "media.mute" to dev.svc.android.internal.MediaMuteData.serializer(),
        "media.subscribe" to dev.svc.android.internal.MediaTrackIdData.serializer(),
        "media.answer" to dev.svc.android.internal.MediaAnswerData.serializer(),
        "media.unsubscribe" to dev.svc.android.internal.MediaSubscriptionIdData.serializer(),
        "media.trickle" to dev.svc.android.internal.MediaTrickleData.serializer(),
    )

    @Suppress("UNCHECKED_CAST")
    private fun <T> roundTrip(serializer: KSerializer<T>, json: JsonElement): JsonElement =
        WireJson.encodeToJsonElement(serializer, WireJson.decodeFromJsonElement(serializer, json))

    /** Parses the vector with the library's types and writes it back. */
    private fun reserialize(schema: String, json: JsonElement): JsonElement = when {
        schema.startsWith("rest:") -> {
            val serializer = rest[schema.removePrefix("rest:")] ?: error("the Kotlin library has no type for $schema")
            roundTrip(serializer, json)
        }

        schema == "client-frame" -> {
            val frame = WireJson.decodeFromJsonElement(ClientFrame.serializer(), json)
            val data = frame.data?.let { d ->
                val serializer = clientData[frame.type] ?: error("the Kotlin library does not write ${frame.type}")
                roundTrip(serializer, d)
            }
            WireJson.encodeToJsonElement(ClientFrame.serializer(), frame.copy(data = data))
        }

        schema == "server-frame" -> encodeServerFrame(decodeServerFrame(json.toString()))

        else -> error("unknown schema kind $schema")
    }

    @TestFactory
    fun vectors(): List<DynamicTest> = framesOf(file, 50)

    @TestFactory
    fun controllerEvents(): List<DynamicTest> {
        val tests = framesOf(File(dir, "controller-events.json"), 30)
        val covered = WireJson.parseToJsonElement(File(dir, "controller-events.json").readText()).jsonObject.getValue("vectors").jsonArray
            .map { it.jsonObject }
            .filter { it.getValue("valid").jsonPrimitive.boolean }
            .map { it.getValue("json").jsonObject.getValue("type").jsonPrimitive.content }
            .toSet()
        return tests + DynamicTest.dynamicTest("every controller event the library reads has a valid vector") {
            assertEquals(CONTROLLER_EVENTS.keys, covered)
        }
    }

    @TestFactory
    fun controllerRequests(): List<DynamicTest> {
        val v = WireJson.parseToJsonElement(File(dir, "controller-requests.json").readText()).jsonObject
        fun cases(key: String) = v.getValue(key).jsonArray.map { it.jsonObject }
        val valid = cases("valid")
        val writes = { type: String, data: JsonElement ->
            val serializer = CONTROLLER_REQUESTS[type] ?: error("the Kotlin library does not write $type")
            roundTrip(serializer, data)
        }
        val tests = valid.map { c ->
            val type = c.getValue("type").jsonPrimitive.content
            val data = c.getValue("data")
            DynamicTest.dynamicTest("valid: $type $data") { assertEquals(data, writes(type, data), "$type: written JSON differs") }
        } + cases("invalid").map { c ->
            val type = c.getValue("type").jsonPrimitive.content
            val data = c.getValue("data")
            DynamicTest.dynamicTest("invalid: $type $data") {
                // Requests are only written: an invalid one must be impossible to build, or not come out as given.
                val written = try {
                    writes(type, data)
                } catch (_: SerializationException) {
                    null
                } catch (_: IllegalArgumentException) {
                    null
                }
                assertNotEquals(data, written, "$type: the Kotlin types can write an invalid request")
            }
        }
        return tests + DynamicTest.dynamicTest("every request type has a valid vector") {
            assertEquals(CONTROLLER_REQUESTS.keys, valid.map { it.getValue("type").jsonPrimitive.content }.toSet())
        }
    }

    @Test
    fun controllerMirror() {
        val v = WireJson.parseToJsonElement(File(dir, "controller-mirror.json").readText()).jsonObject
        val self = v.getValue("self").jsonPrimitive.content
        val snapshot = v.getValue("snapshot").jsonObject
        assertEquals(snapshot, roundTrip(ControllerSnapshot.serializer(), snapshot), "the snapshot re-serializes unchanged")
        val hostId = snapshot.getValue("hostUserId").jsonPrimitive.content
        val people = v.getValue("participants").jsonArray.map { it.jsonPrimitive.content }.map { id ->
            SvcParticipant("PA_$id", id, id, isHost = id == hostId, joinedAt = "2026-01-01T00:00:00.000Z", connected = true)
        }
        val me = people.first { it.userId == self }
        val roomSnapshot = RoomSnapshot(
            "PA_$self",
            "x",
            SvcRoomInfo("r", SvcLiveType.VIDEO_CONFERENCE, SvcRoomStatus.ACTIVE, 10, people.size, true, null, "2026-01-01T00:00:00.000Z"),
            me,
            people,
            1000,
            MediaSnapshot(false, emptyList(), SvcMediaPermissions(emptyList(), false), emptyList()),
        )
        val room = Room(
            roomSnapshot,
            object : Room.RoomTransport {
                override suspend fun sendMessage(message: String): Long = 0

                override suspend fun updateMetadata(metadata: String): Long = 0
            },
        )
        val mirror = ControllerMirror(deliver = { it() }, switchRoom = { _, _ -> })
        mirror.snapshot(snapshot, v.getValue("seq").jsonPrimitive.long, roomOptions("r", self))
        for (e in v.getValue("events").jsonArray) {
            val frame = decodeServerFrame(e.toString()) as EventFrame<*>
            mirror.event(room, frame)
        }
        val state = WireJson.encodeToJsonElement(MirrorView.serializer(), MirrorView.of(mirror.state.value)).jsonObject
        for ((key, want) in v.getValue("expect").jsonObject) {
            val got = state.getValue(key)
            if (key == "media") {
                val sort = { x: JsonElement -> x.jsonArray.sortedBy { it.jsonObject.getValue("userId").jsonPrimitive.content } }
                assertEquals(sort(want), sort(got), key)
            } else {
                assertEquals(want, got, key)
            }
        }
        val want = v.getValue("expectPoll").jsonObject
        val poll = WireJson.encodeToJsonElement(
            SvcPoll.serializer(),
            mirror.state.value.polls.first {
                it.id ==
                    want.getValue("id").jsonPrimitive.content
            },
        ).jsonObject
        for ((key, value) in want) assertEquals(value, poll.getValue(key), "poll $key")
        assertTrue(room.participants.first { it.userId == self }.isHost, "role.changed updates the participants' isHost")
    }

    /** The mirrored state's fields that the vector names, in the wire's JSON. */
    @kotlinx.serialization.Serializable
    private data class MirrorView(
        val seq: Long,
        val hostUserId: String?,
        val coHosts: List<String>,
        val spotlight: List<String>,
        val hands: List<SvcRaisedHand>,
        val typing: List<SvcTypingIndicator>,
        val chat: List<SvcChatMessage>,
        val waiting: List<SvcWaitingParticipant>,
        val media: List<SvcMediaState>,
        val settings: SvcRoomSettings,
        val states: List<SvcParticipantState>,
        val quality: List<SvcNetworkQuality>,
        val invitations: List<SvcInvitation>,
        val breakouts: List<SvcBreakoutRoom>,
    ) {
        companion object {
            fun of(s: SvcRoomControllerState) = MirrorView(
                s.seq, s.hostUserId, s.coHosts, s.spotlight, s.hands, s.typing, s.chat, s.waiting, s.media, s.settings, s.states,
                s.quality, s.invitations, s.breakouts,
            )
        }
    }

    private fun framesOf(file: File, atLeast: Int): List<DynamicTest> {
        val vectors = WireJson.parseToJsonElement(file.readText()).jsonObject.getValue("vectors").jsonArray.map { it.jsonObject }
        assertTrue(vectors.size > atLeast, "vectors loaded from $file")
        return vectors.map { v ->
            val name = v.getValue("name").jsonPrimitive.content
            val schema = v.getValue("schema").jsonPrimitive.content
            val valid = v.getValue("valid").jsonPrimitive.boolean
            val json = v.getValue("json")
            DynamicTest.dynamicTest("${if (valid) "valid" else "invalid"}: $name") {
                if (valid) {
                    assertEquals(json, reserialize(schema, json), "$name: re-serialized JSON differs")
                } else {
                    val refused = try {
                        reserialize(schema, json)
                        false
                    } catch (_: SerializationException) {
                        true
                    } catch (_: IllegalArgumentException) {
                        true
                    }
                    assertTrue(refused, "$name: the Kotlin types accepted an invalid vector")
                }
            }
        }
    }
}
