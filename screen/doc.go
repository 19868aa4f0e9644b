// Package screen analyses shell commands for Armory's tool.cli before they
// run. It parses the command with mvdan.cc/sh/v3/syntax (bash dialect) and
// examines every simple command, wherever it occurs: in pipelines, &&/||/;
// lists, subshells and blocks, $(…) and backquote substitutions, <(…)/>(…)
// process substitutions, if/while/for/case bodies, function bodies,
// here-documents (whose text is screened when it feeds a shell or a SQL
// client), and the literal scripts of sh -c/bash -c, eval, ssh, su -c,
// watch, env -S, trap, alias and git aliases (parsed and screened
// recursively).
//
// Words are resolved statically: quotes and escapes are removed ("r""m",
// \rm, 'rm', $'\x72m' all name rm), brace expansion is performed, a program
// path is reduced to its name (/bin/rm is rm), and wrappers are seen through
// together with their own options: sudo, doas, su, runuser, env, command,
// builtin, exec, nice, ionice, timeout, nohup, setsid, stdbuf, unbuffer,
// time, chrt, taskset, chroot, nsenter, unshare, flock, watch, strace,
// ltrace, xargs (with items from a literal pipe), busybox, toybox,
// docker/podman exec and kubectl exec.
//
// Verdicts, the most severe over all simple commands:
//
//   - Block (every profile, no override): recursive removal of /, /*, ~,
//     $HOME or a top-level system directory in any spelling; mkfs*, wipefs,
//     blkdiscard, partition-table wipes; dd, shred, tee, cp or a redirection
//     onto a block device; DROP DATABASE (and DROP SCHEMA … CASCADE) sent to
//     a SQL client by argument, pipe or here-doc, dropdb, redis FLUSHALL,
//     mongo dropDatabase(); forced or mirror pushes and remote deletion of
//     main/master; fork bombs (a function that calls itself in a pipeline or
//     in the background); recursive chmod/chown of / or a system directory;
//     find -delete over / or ~ without a filter; relative removals after
//     cd into / or ~ (cd / && rm -rf *). A parse error, a '#' that the
//     parser and bash read differently, and any exceeded limit
//     (MaxCommandBytes, MaxNesting, MaxScriptDepth, the work budget) is
//     Block.
//   - Confirm: anything the parser cannot see through (eval, a non-literal
//     sh -c script, a command name from an expansion, … | sh, source),
//     privilege wrappers (sudo, doas, su, chroot, …), output redirection to
//     a file, arithmetic on variables, and every command not known safe.
//   - Allow: every simple command is on the read-only allow-list (ls, cat,
//     grep, rg, head, tail, wc, echo, find, git status/log/diff/show, …)
//     without a dangerous option (find -exec/-delete, rg --pre, sed -i,
//     git diff --output, sort -o, …) and nothing is written to a file other
//     than /dev/null.
//
// Static values assigned to variables anywhere in the command (X=/) are
// substituted only to find more catastrophic commands (rm -rf $X), never to
// allow one.
//
// Check is safe for concurrent use and never panics.
package screen
