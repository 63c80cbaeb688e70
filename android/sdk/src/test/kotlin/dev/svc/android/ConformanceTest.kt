package dev.svc.android

import dev.svc.android.internal.ClientFrame
import dev.svc.android.internal.MessageSendData
import dev.svc.android.internal.ParticipantList
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
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory

/**
 * The one contract: every vector of packages/protocol/vectors/realtime.json (also held against the
 * TypeScript schemas by packages/client/test/conformance.test.ts). A valid vector must parse into the
 * library's types and serialize back to the same JSON (a field the Kotlin types lack or rename fails
 * here); an invalid one must be refused.
 */
class ConformanceTest {
    private val file = File(System.getProperty("svc.vectorsDir") ?: "../../packages/protocol/vectors", "realtime.json")

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
    fun vectors(): List<DynamicTest> {
        val vectors = WireJson.parseToJsonElement(file.readText()).jsonObject.getValue("vectors").jsonArray.map { it.jsonObject }
        assertTrue(vectors.size > 50, "vectors loaded from $file")
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
