import type { ErrorDefinitions } from './types.ts';

/** Recordings (egress) codes. */
export const RECORDINGS_ERRORS = {
  recording_not_found: { status: 404, title: 'The recording was not found.' },
  recording_in_progress: {
    status: 409,
    title: 'This room is already being recorded; stop that recording first.',
  },
  recording_invalid_filepath: {
    status: 400,
    title:
      'The filepath must be relative: "/"-separated segments of letters, digits, ".", "_" and "-", none starting with ".".',
  },
  recording_filepath_taken: {
    status: 409,
    title: 'Another recording of this project already uses this filepath.',
  },
  recording_not_active: {
    status: 409,
    title: 'The recording is not running (only a STARTED recording can be paused or resumed).',
  },
  recording_not_ready: { status: 409, title: 'The recording has no file (it is not COMPLETED).' },
  download_url_invalid: {
    status: 403,
    title: 'The download URL is not valid (altered or not signed here).',
  },
  download_url_expired: { status: 410, title: 'The download URL has expired.' },
  range_not_satisfiable: { status: 416, title: 'The requested range is outside the file.' },
} as const satisfies ErrorDefinitions;
