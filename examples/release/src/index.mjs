// units: small formatting helpers for sizes and durations.
export { formatBytes, parseBytes } from './bytes.mjs';
export { formatDuration } from './duration.mjs';
