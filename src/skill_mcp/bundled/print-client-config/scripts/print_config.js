#!/usr/bin/env node
// Print a ready-to-paste skill-mcp configuration for each MCP client on this machine.
// Node standard library only; reads nothing but directory listings, writes nothing,
// opens no network connection. Usage:
//   node scripts/print_config.js [--client NAME] [--command PATH] [--skills-dir DIR]...
//                                [--name SERVER] [--home DIR] [--json]
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const CLIENTS = ['claude-desktop', 'claude-code', 'vscode', 'cursor', 'windsurf', 'zed',
  'codex', 'gemini', 'goose'];

function parseArgs(argv) {
  const opts = { client: 'all', command: null, skillsDirs: [], name: 'skills', home: null, json: false };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      i += 1;
      return argv[i];
    };
    if (arg === '--client') opts.client = next();
    else if (arg === '--command') opts.command = next();
    else if (arg === '--skills-dir') opts.skillsDirs.push(next());
    else if (arg === '--name') opts.name = next();
    else if (arg === '--home') opts.home = next();
    else if (arg === '--json') opts.json = true;
    else throw new Error(`unknown argument ${arg}`);
  }
  if (opts.client !== 'all' && !CLIENTS.includes(opts.client)) {
    throw new Error(`unknown client ${opts.client}; one of: all, ${CLIENTS.join(', ')}`);
  }
  return opts;
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch (err) {
    return false;
  }
}

// Clients started from a desktop do not read the shell profile, so an absolute path is
// the only command that works everywhere. Look where pip, pipx and venvs usually put it.
function findCommand(home) {
  const exe = process.platform === 'win32' ? 'skill-mcp.exe' : 'skill-mcp';
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean);
  dirs.push(path.join(home, '.local', 'bin'), path.join(home, '.venv', 'bin'),
    path.join(home, '.venvs', 'skill-mcp', 'bin'), '/usr/local/bin', '/opt/skill-mcp/bin');
  for (const dir of dirs) {
    const candidate = path.join(dir, exe);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function expandHome(p, home) {
  if (p === '~') return home;
  if (p.startsWith('~/')) return path.join(home, p.slice(2));
  return p;
}

function configDirs(home) {
  const appData = process.env.APPDATA || path.join(home, 'AppData', 'Roaming');
  const mac = process.platform === 'darwin';
  const win = process.platform === 'win32';
  let desktop = null;
  if (mac) desktop = path.join(home, 'Library', 'Application Support', 'Claude');
  else if (win) desktop = path.join(appData, 'Claude');
  return {
    'claude-desktop': desktop && path.join(desktop, 'claude_desktop_config.json'),
    'claude-code': '.mcp.json (project) or: claude mcp add',
    vscode: '.vscode/mcp.json (workspace) or "MCP: Open User Configuration"',
    cursor: path.join(home, '.cursor', 'mcp.json'),
    windsurf: path.join(home, '.codeium', 'windsurf', 'mcp_config.json'),
    zed: win ? path.join(appData, 'Zed', 'settings.json') : path.join(home, '.config', 'zed', 'settings.json'),
    codex: path.join(home, '.codex', 'config.toml'),
    gemini: path.join(home, '.gemini', 'settings.json'),
    goose: win ? path.join(appData, 'Block', 'goose', 'config', 'config.yaml')
      : path.join(home, '.config', 'goose', 'config.yaml'),
  };
}

const q = (s) => JSON.stringify(s); // a JSON string is also a valid TOML and YAML string

function snippet(client, name, command, args) {
  const entry = { command, args };
  switch (client) {
    case 'claude-desktop':
    case 'cursor':
    case 'windsurf':
    case 'gemini':
      return { format: 'json', text: JSON.stringify({ mcpServers: { [name]: entry } }, null, 2) };
    case 'claude-code':
      return { format: 'shell', text: `claude mcp add ${name} -- ${[command, ...args].map(shellQuote).join(' ')}` };
    case 'vscode':
      return { format: 'json', text: JSON.stringify({ servers: { [name]: { type: 'stdio', ...entry } } }, null, 2) };
    case 'zed':
      return { format: 'json',
        text: JSON.stringify({ context_servers: { [name]: { source: 'custom', ...entry, env: {} } } }, null, 2) };
    case 'codex':
      return { format: 'toml',
        text: `[mcp_servers.${name}]\ncommand = ${q(command)}\nargs = [${args.map(q).join(', ')}]\ntool_timeout_sec = 120\n` };
    case 'goose':
      return { format: 'yaml',
        text: `extensions:\n  ${name}:\n    name: ${q(name)}\n    type: stdio\n    cmd: ${q(command)}\n`
          + `    args: [${args.map(q).join(', ')}]\n    enabled: true\n    envs: {}\n    timeout: 300\n` };
    default:
      throw new Error(`no snippet for ${client}`);
  }
}

function shellQuote(s) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

function present(file) {
  if (!file || !path.isAbsolute(file)) return null;
  try {
    fs.accessSync(path.dirname(file));
    return true;
  } catch (err) {
    return false;
  }
}

function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`print_config: ${err.message}\n`);
    return 2;
  }
  if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(opts.name)) {
    process.stderr.write('print_config: --name must be lowercase letters, digits, - or _\n');
    return 2;
  }
  const home = opts.home || os.homedir();
  const notes = [];
  // Under skill_run a server running as root hands the script a private scratch HOME; the
  // file locations printed would then point into it. Say so instead of printing nonsense.
  if (!opts.home && process.env.TMPDIR && path.resolve(home) === path.resolve(process.env.TMPDIR)) {
    notes.push('HOME is this run\'s scratch directory; pass --home /home/you for real file locations');
  }
  const found = opts.command ? expandHome(opts.command, home) : findCommand(home);
  const command = found || 'skill-mcp';
  const args = ['serve'];
  for (const dir of opts.skillsDirs) {
    const full = expandHome(dir, home);
    if (!path.isAbsolute(full)) notes.push(`--skills-dir ${dir} is relative; clients start servers in their own working directory`);
    args.push('--skills-dir', full);
  }
  if (!found) notes.push('skill-mcp was not found; replace "skill-mcp" with its absolute path (command -v skill-mcp)');
  if (opts.skillsDirs.length === 0) notes.push('no --skills-dir given: the server will serve its bundled pack');
  const files = configDirs(home);
  const wanted = opts.client === 'all' ? CLIENTS : [opts.client];
  const out = {};
  for (const client of wanted) {
    if (client === 'claude-desktop' && !files[client]) {
      out[client] = { file: null, note: 'Claude Desktop is not available for this platform' };
      continue;
    }
    out[client] = { file: files[client], configDirExists: present(files[client]), ...snippet(client, opts.name, command, args) };
  }
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ platform: process.platform, command, args, notes, clients: out }, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(`platform: ${process.platform}\ncommand: ${command} ${args.join(' ')}\n`);
  for (const note of notes) process.stdout.write(`note: ${note}\n`);
  for (const [client, info] of Object.entries(out)) {
    process.stdout.write(`\n== ${client} ==\n`);
    if (!info.text) {
      process.stdout.write(`${info.note}\n`);
      continue;
    }
    const seen = info.configDirExists === true ? ' (its directory exists here)' : '';
    process.stdout.write(`where: ${info.file}${seen}\n${info.text.trimEnd()}\n`);
  }
  return 0;
}

process.exitCode = main();
