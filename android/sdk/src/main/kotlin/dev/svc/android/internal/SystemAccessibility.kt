package dev.svc.android.internal

import android.content.Context
import android.view.accessibility.AccessibilityManager
import android.view.accessibility.CaptioningManager
import dev.svc.android.SvcAccessibilitySettings

/** Reads the device's accessibility state (kept apart so that JVM code never loads android classes). */
internal object SystemAccessibility {
    private const val MAX_LANGUAGE = 35

    fun read(context: Context): SvcAccessibilitySettings {
        val captioning = context.getSystemService(Context.CAPTIONING_SERVICE) as? CaptioningManager
        val accessibility = context.getSystemService(Context.ACCESSIBILITY_SERVICE) as? AccessibilityManager
        return SvcAccessibilitySettings(
            captions = captioning?.isEnabled,
            captionsLanguage = captioning?.locale?.toLanguageTag()?.takeIf { it != "und" }?.take(MAX_LANGUAGE),
            screenReader = accessibility?.let { it.isEnabled && it.isTouchExplorationEnabled },
        )
    }
}
