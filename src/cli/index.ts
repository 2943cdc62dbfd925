import { parseArgs } from 'node:util';
import { ConfigError } from '../config.ts';
import {
  clientCreateCommand, clientDeleteCommand, clientDisableCommand, clientEnableCommand, clientListCommand, clientRotateSecretCommand, clientShowCommand,
  clientUpdateCommand,
} from './client.ts';
import { backupCommand } from './backup.ts';
import { checkCommand } from './check.ts';
import { NoDatabaseError, UsageError, type CliIO, type Command, type Options } from './command.ts';
import { compactCommand } from './compact.ts';
import { exportCommand } from './export.ts';
import { auditPruneCommand, expungeCommand } from './expunge.ts';
import { healthcheckCommand } from './healthcheck.ts';
import { importCommand } from './import.ts';
import { keysReviewCommand, keysRotateCommand } from './keys.ts';
import { migrateCommand } from './migrate.ts';
import { reindexCommand } from './reindex.ts';
import { restoreCommand } from './restore.ts';
import { serveCommand } from './serve.ts';
import { tenantCreateCommand } from './tenant.ts';
import { userCreateCommand, userDeleteCommand, userDisableCommand, userEnableCommand, userListCommand, userShowCommand, userUpdateCommand } from './user.ts';
import { validateCommand } from './validate.ts';

/** Every `cinder` subcommand. */
export const commands: Command[] = [
  serveCommand, tenantCreateCommand,
  clientCreateCommand, clientListCommand, clientShowCommand, clientUpdateCommand, clientDisableCommand, clientEnableCommand, clientDeleteCommand,
  clientRotateSecretCommand,
  userCreateCommand, userListCommand, userShowCommand, userUpdateCommand, userDisableCommand, userEnableCommand, userDeleteCommand,
  keysRotateCommand, keysReviewCommand, importCommand, migrateCommand, reindexCommand, healthcheckCommand, exportCommand,
  validateCommand, expungeCommand, auditPruneCommand, backupCommand, restoreCommand, checkCommand, compactCommand,
];

/** The commands `list` as aligned lines of name and summary. */
function commandLines(list: Command[]): string {
  const width = Math.max(...list.map((c) => c.name.length));
  return list.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n');
}

function overview(): string {
  return (
    'Cinder: a FHIR R4 server with OAuth 2.0 / SMART authorization, terminology and bulk export.\n\n' +
    'Usage: cinder <command> [options]   (no command = serve)\n\nCommands:\n' +
    commandLines(commands) +
    '\n\nRun `cinder <command> --help` for a command\'s options.\n'
  );
}

/** The commands whose first word is `group` (`client` for `client create`, `client list`, ...), if it names a group. */
function groupOf(group: string | undefined): Command[] {
  return group === undefined ? [] : commands.filter((c) => c.name.includes(' ') && c.name.split(' ')[0] === group);
}

/** A group's commands (`cinder client --help`). */
function groupHelp(group: string, members: Command[]): string {
  return `Usage: cinder ${group} <command> [options]\n\nCommands:\n${commandLines(members)}\n\nRun \`cinder ${group} <command> --help\` for a command's options.\n`;
}

/** Finds the longest command name that prefixes argv. */
function match(argv: string[]): { command: Command; rest: string[] } | null {
  for (const c of [...commands].sort((a, b) => b.name.length - a.name.length)) {
    const words = c.name.split(' ');
    if (words.every((w, i) => argv[i] === w)) return { command: c, rest: argv.slice(words.length) };
  }
  return null;
}

/**
 * `rest` with every argument that is not one of `options` (nor an option's value) moved after a `--`, so that
 * parseArgs takes an id such as `-Py2X...` as a positional (Command.dashedPositionals).
 */
function dashedAsPositionals(rest: string[], options: Options): string[] {
  const args: string[] = [];
  const positionals: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--') {
      positionals.push(...rest.slice(i + 1));
      break;
    }
    const name = arg.startsWith('--') ? arg.slice(2).split('=')[0]! : null;
    const option = name !== null ? options[name] : undefined;
    if (!option) {
      positionals.push(arg);
      continue;
    }
    args.push(arg);
    if (option.type === 'string' && !arg.includes('=') && i + 1 < rest.length) args.push(rest[++i]!);
  }
  return positionals.length ? [...args, '--', ...positionals] : args;
}

/** Runs the CLI; returns the exit code. */
export async function runCli(argv: string[], io: CliIO): Promise<number> {
  if (argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    io.stdout(overview());
    return 0;
  }
  const found = argv.length === 0 || argv[0]!.startsWith('--') ? { command: serveCommand, rest: argv } : match(argv);
  if (!found) {
    const members = groupOf(argv[0]);
    if (members.length && argv.length === 2 && (argv[1] === '--help' || argv[1] === '-h')) {
      io.stdout(groupHelp(argv[0]!, members));
      return 0;
    }
    if (members.length && argv.length === 1) {
      io.stderr(`cinder ${argv[0]}: a subcommand is needed\n\n${groupHelp(argv[0]!, members)}`);
      return 2;
    }
    io.stderr(`cinder: unknown command '${argv.join(' ')}'\n\n${members.length ? groupHelp(argv[0]!, members) : overview()}`);
    return 2;
  }
  const { command, rest } = found;
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(`${command.summary}\n\nUsage: ${command.usage}\n`);
    return 0;
  }
  try {
    const args = command.dashedPositionals ? dashedAsPositionals(rest, command.options) : rest;
    const parsed = parseArgs({ args, options: command.options, allowPositionals: command.allowPositionals ?? false, strict: true });
    return await command.run(parsed as never, io);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr(`cinder ${command.name}: ${(err as Error).message}\n\nUsage: ${command.usage}\n`);
      return 2;
    }
    if (err instanceof NoDatabaseError) {
      io.stderr(`cinder ${command.name}: ${err.message}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      io.stderr(`cinder: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
