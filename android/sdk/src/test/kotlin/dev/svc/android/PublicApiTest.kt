package dev.svc.android

import java.io.File
import org.jetbrains.kotlin.abi.tools.AbiFilters
import org.jetbrains.kotlin.abi.tools.AbiTools
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test

/**
 * The binary-compatibility check: the public JVM ABI of the compiled library (Kotlin's abi-tools, the
 * engine of the Gradle ABI validation) must equal the committed `api/svc-android.api`. After an
 * intended API change, review the difference and run `mvn test -Dapi.update=true`.
 */
class PublicApiTest {
    @Test
    fun `public API matches the committed dump`() {
        val classFiles = File("target/classes").walk().filter { it.isFile && it.extension == "class" }.toList()
        val dump = StringBuilder().also { AbiTools.getInstance().printJvmDump(it, classFiles, AbiFilters.EMPTY) }.toString()
        val apiFile = File("api/svc-android.api")
        if (System.getProperty("api.update") == "true") {
            apiFile.parentFile.mkdirs()
            apiFile.writeText(dump)
        }
        assertEquals(
            apiFile.takeIf {
                it.exists()
            }?.readText(),
            dump,
            "The public API changed; review it and run: mvn test -Dapi.update=true",
        )
    }
}
