package dev.svc.android.internal

import android.content.Context
import android.content.pm.PackageManager
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Dispatchers

/** What the client needs from the device: its package name and its runtime permissions. */
internal interface Platform {
    val packageName: String?

    /** The permissions among [permissions] that the app does not hold. */
    fun missingPermissions(permissions: List<String>): List<String>

    /** Where handlers run. */
    val callbackDispatcher: CoroutineDispatcher
}

/** The Android platform: a Context's package and permissions; handlers on the main thread. */
internal class AndroidPlatform(context: Context) : Platform {
    private val app: Context = context.applicationContext ?: context

    override val packageName: String? = app.packageName

    override fun missingPermissions(permissions: List<String>): List<String> =
        permissions.filter { app.checkSelfPermission(it) != PackageManager.PERMISSION_GRANTED }

    override val callbackDispatcher: CoroutineDispatcher get() = Dispatchers.Main
}
