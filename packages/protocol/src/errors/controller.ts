import type { ErrorDefinitions } from './types.ts';

/** Room controller codes (signaling `error` frames and `session.closed`; docs/room-controller.md). */
export const CONTROLLER_ERRORS = {
  cohost_required: { status: 403, title: 'Only a host or co-host may do this.' },
  participant_not_found: { status: 404, title: 'No participant with this user id is in the room.' },
  invalid_target: { status: 400, title: 'This operation cannot target that participant.' },
  kicked: { status: 403, title: 'A host removed you from the room.' },
  banned: { status: 403, title: 'You were removed from this room and may not rejoin it.' },
  poll_not_found: { status: 404, title: 'The poll was not found.' },
  poll_ended: { status: 409, title: 'The poll has ended.' },
  poll_option_invalid: { status: 400, title: 'The poll has no such option.' },
  already_voted: { status: 409, title: 'You have already answered this poll.' },
  invalid_reaction: {
    status: 400,
    title: 'The reaction is not an allowed name or a single emoji.',
  },
  invitation_not_found: { status: 404, title: 'The invitation was not found.' },
  invitation_closed: {
    status: 409,
    title: 'The invitation has already been answered or has ended.',
  },
  not_invited: { status: 403, title: 'You are not invited by this invitation.' },
  waiting_not_found: { status: 404, title: 'Nobody with this user id is in the waiting room.' },
  waiting_rejected: { status: 403, title: 'A host declined your request to join.' },
  waiting_timeout: { status: 408, title: 'Nobody admitted you before the waiting room timeout.' },
  breakout_not_found: { status: 404, title: 'The breakout room was not found.' },
  breakout_not_assigned: { status: 403, title: 'You are not assigned to this breakout room.' },
  limit_reached: { status: 409, title: 'The room has reached the limit for this kind of item.' },
  self_unmute_not_allowed: {
    status: 403,
    title: 'A host muted you and does not allow unmuting yourself.',
  },
} as const satisfies ErrorDefinitions;
