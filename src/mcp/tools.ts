/**
 * The tools `capsule mcp` offers (docs/mcp.md#tools): their input schemas (zod, published as JSON
 * Schema by the MCP SDK) and their descriptions, written for the model that calls them.
 */
import * as z from 'zod';

export const SHELL_RUN_DESCRIPTION = [
  'Run one command in a contained session (its process tree is tracked, recorded and ended with the session).',
  'It runs in the foreground and answers with its exit code and output; if it is still running after grace_secs',
  '(or the session default) it keeps running in the background and the answer gives its work_id instead:',
  'follow it with background_command (wait for it, wait until its output matches a pattern, read its status,',
  'write to it, stop it). Its completion is also reported once, with a later tool result, if you never wait for it.',
  'The first word of command is the program (split like a shell, no shell features); to run a shell script',
  'give binary "bash" and the script as command. Only allowed programs run: a refused one says how to allow it.',
].join(' ');

export const shellRunInput = {
  command: z.string().describe('The command line, e.g. "make -j4 test"; with binary "bash" (or sh, zsh…): the script itself.'),
  binary: z.string().optional().describe('The program, when command is its script or its arguments: "bash" runs command as a bash script (bash -c).'),
  grace_secs: z.number().min(0).nullable().optional().describe('Seconds in the foreground before the command moves to the background (0: at once; null: never). Default: the session\'s.'),
  stdin: z.string().optional().describe('Text written to the command\'s stdin, which is then closed. Default: empty stdin.'),
  interactive: z.boolean().optional().describe('Keep the command\'s stdin open, to write to it later with background_command operation "write" (REPLs, prompts). Default false.'),
  tty: z
    .boolean()
    .optional()
    .describe('Run it in a terminal (a pseudo-terminal): its output comes line by line as on a screen (programs that buffer a pipe, colours, progress bars), stdout and stderr together with \r\n line ends, and what you write with background_command "write" is typed into it (echoed). Default false.'),
  cols: z.number().int().min(1).max(65535).optional().describe('With tty: the terminal\'s width in characters (default 80).'),
  rows: z.number().int().min(1).max(65535).optional().describe('With tty: the terminal\'s height in lines (default 24).'),
  deadline_secs: z
    .number()
    .positive()
    .nullable()
    .optional()
    .describe('Seconds from its start after which the command is stopped (its answer or completion then says ended_by "deadline", state "timed_out"); null: none. Default: the session\'s.'),
  idle_secs: z
    .number()
    .positive()
    .nullable()
    .optional()
    .describe('Once in the background: seconds it may print nothing before the session notifies you, once (it keeps running; status shows idle_at_ms); null: never. Default: the session\'s.'),
};

export const BACKGROUND_COMMAND_DESCRIPTION = [
  'Follow a command that moved to the background (its work_id comes from shell_run).',
  'operation "status": its state, exit code and the tail of its output (without work_id: every command of the session);',
  '"wait": until it finishes, at most wait_secs (default 600), or with until (a JavaScript regular expression) until a line of',
  'its output matches — since "start" searches the whole output so far (no race with lines already printed),',
  'since "now" only new output, a number: from that byte offset (the output_bytes a status answered);',
  '"stop": SIGTERM to its whole process tree, SIGKILL after 2 s;',
  '"write": write input (text, or input_base64 for bytes) to the stdin of a command started with interactive: true or tty: true',
  '(close_stdin: true then closes it). The answer says command_state (running, exited, stopped, killed, timed_out), exit_code, signal and output_bytes.',
].join(' ');

export const backgroundCommandInput = {
  operation: z.enum(['status', 'wait', 'stop', 'write']).describe('What to do.'),
  work_id: z.string().optional().describe('The wrk_… id shell_run answered. Required except for status, which lists every command without it.'),
  wait_secs: z.number().int().min(0).optional().describe('wait: the longest to wait, seconds (default and most: 600).'),
  until: z.string().max(1024).optional().describe('wait: return as soon as a line of output matches this JavaScript regular expression (multiline).'),
  since: z.union([z.enum(['start', 'now']), z.number().int().min(0)]).optional().describe('wait with until: where to search from — "start" (all output so far, the default here), "now" (only output printed after this call), or a byte offset (a status\'s output_bytes).'),
  tail_bytes: z.number().int().min(1).max(16384).optional().describe('How many bytes of the output\'s tail to show (1…16384; default 16384).'),
  input: z.string().optional().describe('write: text to write to the command\'s stdin (add "\\n" to end a line).'),
  input_base64: z.string().optional().describe('write: bytes to write, base64-encoded (instead of input).'),
  close_stdin: z.boolean().optional().describe('write: close the command\'s stdin after writing (end of input).'),
};

export const PLAN_RUN_DESCRIPTION = [
  'Run a capsule plan (a JSON DAG of tool, shell and capsule steps: {"id": …, "steps": [{"id": …, "shell": …, "depends_on": […]}]})',
  'in this session, given inline as plan or as path (a file inside the workdir).',
  'With wait (default true) the answer is the plan\'s report; with wait false it answers at once with its task_id',
  'and the report comes once with a later tool result. A refused plan answers with the refusal and how to fix it.',
].join(' ');

export const planRunInput = {
  plan: z.record(z.string(), z.unknown()).optional().describe('The plan itself, as a JSON object.'),
  path: z.string().optional().describe('A plan file inside the workdir (instead of plan).'),
  wait: z.boolean().optional().describe('Wait for the report (default true).'),
};

export const TASK_CANCEL_DESCRIPTION = [
  'Cancel a plan_run or shell_run task by its task_id: a plan stops dispatching steps (running steps end on their own',
  'bound; force: true ends them now); a shell_run still in the foreground moves to the background (stop it with',
  'background_command). The answer lists what still runs.',
].join(' ');

export const taskCancelInput = {
  task_id: z.string().min(1).describe('The tsk_… id of the task (plan_run with wait false answers it).'),
  force: z.boolean().optional().describe('End running steps now instead of letting them finish (default false).'),
};
