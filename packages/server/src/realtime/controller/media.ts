import { type CommandContext, type CommandGroup, refuse } from './command.ts';
import { type ControllerState, mediaOf, participantByUser } from './state.ts';

/**
 * What the media plane does for moderation to hold against a client that ignores it: mute (or
 * lift the mute of) every audio track a user publishes, in the SFU (Janus VideoRoom `moderate`),
 * so subscribers stop receiving it whatever the publisher sends. Set by the realtime plugin from
 * the media service; without a media engine the controller keeps and announces the state only.
 */
export interface MediaModeration {
  /** `bySid`: the session that decided (it is `by` in the resulting `media.muted` events). */
  setAudioMuted(rid: string, userId: string, muted: boolean, bySid: string): Promise<void>;
}

/**
 * Audio/video/screen-share state and moderation. Each participant reports its own microphone,
 * camera and screen share; a host or co-host mutes someone (forced) but unmuting someone else is
 * only a request the user accepts; `mute_all` (host) may forbid self-unmute.
 */
export function mediaCommands(engine: () => MediaModeration | null): CommandGroup {
  return {
    'media.update_self': {
      kind: 'locked',
      who: 'anyone',
      run(ctx, data) {
        const m = mediaOf(ctx.ctl, ctx.claims.userId);
        if (data.microphoneMuted === false && m.microphoneMuted && !m.selfUnmuteAllowed) {
          return refuse('self_unmute_not_allowed');
        }
        const lift = data.microphoneMuted === false && m.microphoneMuted;
        if (data.microphoneMuted !== undefined) m.microphoneMuted = data.microphoneMuted;
        const e = engine();
        // Unmuting oneself (allowed) also lifts a moderator's mute in the SFU.
        const self = ctx.actor?.sid ?? '';
        if (lift && e) ctx.after(() => e.setAudioMuted(ctx.room.rid, m.userId, false, self));
        if (data.cameraEnabled !== undefined) m.cameraEnabled = data.cameraEnabled;
        if (data.screenShareEnabled !== undefined) m.screenShareEnabled = data.screenShareEnabled;
        ctx.emit('media.state_changed', { ...m, by: null });
        return {};
      },
    },
    'media.mute_participant': {
      kind: 'locked',
      who: 'admin',
      run(ctx, { userId }) {
        if (!participantByUser(ctx.room, userId)) return refuse('participant_not_found');
        const m = mediaOf(ctx.ctl, userId);
        m.microphoneMuted = true;
        ctx.emit('media.state_changed', { ...m, by: ctx.claims.userId });
        const e = engine();
        if (e) ctx.after(() => e.setAudioMuted(ctx.room.rid, userId, true, ctx.actor?.sid ?? ''));
        return {};
      },
    },
    'media.request_unmute': {
      kind: 'locked',
      who: 'admin',
      run(ctx, { userId }) {
        if (!participantByUser(ctx.room, userId)) return refuse('participant_not_found');
        const m = mediaOf(ctx.ctl, userId);
        m.selfUnmuteAllowed = true;
        ctx.emit('media.unmute_requested', { userId, by: ctx.claims.userId });
        return {};
      },
    },
    'media.mute_all': {
      kind: 'locked',
      who: 'host',
      run(ctx, data) {
        const allowSelfUnmute = data.allowSelfUnmute ?? true;
        const e = engine();
        for (const p of ctx.room.participants) {
          if (p.userId === ctx.claims.userId) continue;
          const m = mediaOf(ctx.ctl, p.userId);
          m.microphoneMuted = true;
          m.selfUnmuteAllowed = allowSelfUnmute;
          if (e)
            ctx.after(() => e.setAudioMuted(ctx.room.rid, p.userId, true, ctx.actor?.sid ?? ''));
        }
        ctx.emit('media.all_muted', { allowSelfUnmute, by: ctx.claims.userId });
        return {};
      },
    },
    'media.unmute_all': {
      kind: 'locked',
      who: 'host',
      run(ctx) {
        for (const m of ctx.ctl.media) m.selfUnmuteAllowed = true;
        ctx.ctl.heldMutes = [];
        ctx.emit('media.all_unmute_requested', { by: ctx.claims.userId });
        return {};
      },
    },
  };
}

/**
 * Keeps the moderation of users who left for good: a mute they may not lift themselves is held by
 * user id, so leaving and rejoining (with any token) does not undo it.
 */
export function holdMutes(ctl: ControllerState, present: Set<string>) {
  const held = ctl.media
    .filter((m) => !present.has(m.userId) && m.microphoneMuted && !m.selfUnmuteAllowed)
    .map((m) => m.userId);
  if (held.length > 0) ctl.heldMutes = [...new Set([...(ctl.heldMutes ?? []), ...held])];
}

/** A user who left with a held mute rejoins muted, self-unmute not allowed; the room is told. */
export function restoreHeldMute(
  ctl: ControllerState,
  userId: string,
  emit: CommandContext['emit'],
) {
  if (!ctl.heldMutes?.includes(userId)) return;
  ctl.heldMutes = ctl.heldMutes.filter((u) => u !== userId);
  const m = mediaOf(ctl, userId);
  m.microphoneMuted = true;
  m.selfUnmuteAllowed = false;
  emit('media.state_changed', { ...m, by: null });
}
