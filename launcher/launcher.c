/* bashcall's native sandbox launcher: a static program without libc that
 * confines itself and execs the command. It does what the Go launcher
 * (runLauncher in sandbox_linux.go) does, in the same order and with the
 * same messages, without a second Go runtime start per call.
 *
 *   launcher __launch [-ns ID] [-w P]... [-pin P]... [-p P]... [-deny P]...
 *            [-rf P]... [-net off] -- ARGV...
 *
 * bashcall hands it these descriptors:
 *   3  the status pipe: nothing when the exec succeeds, "S<why>" when
 *      confinement failed, "E<why>" when ARGV could not be executed
 *   4  the Landlock ruleset, built by bashcall from the same arguments
 *   5  a pipe holding 'P' and the seccomp program (struct sock_filter[]),
 *      or 'S' and why bashcall could not build the ruleset or program
 *   6  this program (a sealed memfd), closed at once
 * -deny, -rf and -net shaped descriptors 4 and 5 and are skipped here.
 *
 * Order: descriptors beyond the status pipe closed, the mount namespace
 * arranged (while the capabilities to do it remain), every capability
 * dropped, no_new_privs, the Landlock ruleset, the seccomp filter, exec.
 * Any failure writes to the status pipe and exits 125: nothing runs. */

#include "sys.h"

#define AT_FDCWD (-100)
#define AT_EMPTY_PATH 0x1000
#define AT_RECURSIVE 0x8000
#define O_CLOEXEC 02000000
#define O_PATH 010000000
#define RESOLVE_NO_SYMLINKS 0x04
#define OPEN_TREE_CLONE 1
#define MOVE_MOUNT_F_EMPTY_PATH 0x04
#define MOVE_MOUNT_T_EMPTY_PATH 0x40
#define MOUNT_ATTR_RDONLY 0x1
#define MOUNT_ATTR_NODEV 0x4
#define MS_REC 0x4000
#define MS_PRIVATE (1 << 18)
#define F_SETFD 2
#define FD_CLOEXEC 1
#define STATX_TYPE 1
#define STATX_INO 0x100
#define S_IFMT 0170000
#define S_IFDIR 0040000
#define S_IFIFO 0010000
#define PR_SET_DUMPABLE 4
#define PR_SET_SECCOMP 22
#define PR_CAPBSET_DROP 24
#define PR_SET_SECUREBITS 28
#define PR_SET_NO_NEW_PRIVS 38
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#define SECCOMP_MODE_FILTER 2
#define CAP_SETPCAP 8
#define CAP_VERSION_3 0x20080522
#define EINVAL 22
#define ENOENT 2
#define ELOOP 40

#define STATUS_FD 3
#define RULESET_FD 4
#define PROGRAM_FD 5

/* Secure bits (include/uapi/linux/securebits.h): root gains no
 * capabilities by exec or by a change of uid, for good. */
#define SECURE_BITS ((1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7))

#define MAX_PATHS 4096
#define MAX_FILTERS 4096

struct open_how {
	u64 flags, mode, resolve;
};

struct mount_attr {
	u64 attr_set, attr_clr, propagation, userns_fd;
};

struct cap_header {
	u32 version;
	int pid;
};

struct cap_data {
	u32 effective, permitted, inheritable;
};

struct sock_filter {
	u16 code;
	u8 jt, jf;
	u32 k;
};

struct sock_fprog {
	unsigned short len;
	struct sock_filter *filter;
};

static struct {
	const char *writable[MAX_PATHS], *pins[MAX_PATHS], *protected[MAX_PATHS];
	int nwritable, npins, nprotected;
	const char *parent_ns; /* bashcall's mount namespace; 0: no -ns */
	char **argv;
} spec;

static const char *dirs[MAX_PATHS]; /* the writable directories bound */
static long trees[MAX_PATHS];        /* their clones, until attached */
static int ndirs;

static struct sock_filter program[MAX_FILTERS + 1]; /* one more: the read ends on EOF */
static char msg[4096]; /* bashcall reads at most 4096 bytes of status */
static int msglen;

/* --- the message of a failure, built as the Go launcher formats it --- */

static size_t slen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static int streq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static void put(const char *s)
{
	while (*s && msglen < (int)sizeof(msg) - 1)
		msg[msglen++] = *s++;
}

static void putc_(char c)
{
	if (msglen < (int)sizeof(msg) - 1)
		msg[msglen++] = c;
}

static void putint(long v)
{
	char b[24];
	int i = 0;
	if (v < 0) {
		putc_('-');
		v = -v;
	}
	do
		b[i++] = (char)('0' + v % 10);
	while ((v /= 10) && i < 23);
	while (i)
		putc_(b[--i]);
}

/* putq writes s quoted as Go's %q does for the bytes a path holds: printable
 * ASCII as is, " and \ escaped, the usual control escapes, other bytes
 * below 0x80 as \xNN; bytes from 0x80 (UTF-8) are copied. */
static void putq(const char *s)
{
	static const char hex[] = "0123456789abcdef";
	putc_('"');
	for (; *s; s++) {
		u8 c = (u8)*s;
		switch (c) {
		case '"': put("\\\""); continue;
		case '\\': put("\\\\"); continue;
		case '\a': put("\\a"); continue;
		case '\b': put("\\b"); continue;
		case '\f': put("\\f"); continue;
		case '\n': put("\\n"); continue;
		case '\r': put("\\r"); continue;
		case '\t': put("\\t"); continue;
		case '\v': put("\\v"); continue;
		}
		if (c < 0x20 || c == 0x7f) {
			put("\\x");
			putc_(hex[c >> 4]);
			putc_(hex[c & 15]);
		} else
			putc_((char)c);
	}
	putc_('"');
}

/* puterr writes errno e as Go's syscall.Errno prints it. */
static void puterr(long e)
{
	static const struct {
		int no;
		const char *text;
	} texts[] = {
		{1, "operation not permitted"}, {2, "no such file or directory"},
		{5, "input/output error"}, {7, "argument list too long"},
		{8, "exec format error"}, {9, "bad file descriptor"},
		{11, "resource temporarily unavailable"}, {12, "cannot allocate memory"},
		{13, "permission denied"}, {14, "bad address"},
		{16, "device or resource busy"}, {17, "file exists"},
		{18, "invalid cross-device link"}, {20, "not a directory"},
		{21, "is a directory"}, {22, "invalid argument"},
		{23, "too many open files in system"}, {24, "too many open files"},
		{26, "text file busy"}, {28, "no space left on device"},
		{30, "read-only file system"}, {36, "file name too long"},
		{38, "function not implemented"}, {40, "too many levels of symbolic links"},
		{77, "file descriptor in bad state"}, {95, "operation not supported"},
	};
	for (unsigned i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		if (texts[i].no == e) {
			put(texts[i].text);
			return;
		}
	}
	put("errno ");
	putint(e);
}

/* fail writes the message with its kind ('S' or 'E') to the status pipe
 * and exits 125. */
static void __attribute__((noreturn)) fail(char kind)
{
	char *p = msg;
	long n = msglen;
	msg[0] = kind;
	while (n > 0) {
		long w = sys3(NR_write, STATUS_FD, p, n);
		if (w <= 0)
			break;
		p += w, n -= w;
	}
	sys1(NR_exit_group, 125);
	for (;;)
		;
}

/* kindOf is the kind of a failure with error -err: 'E' (the command
 * could not be started) when the host ran short of descriptors, memory or
 * processes, as a fork or an open can (failureKind in sandbox_linux.go);
 * else 'S', confinement failed. */
static char kindOf(long err)
{
	return err == -12 || err == -11 || err == -23 || err == -24 ? 'E' : 'S';
}

/* failErr is fail with "what: errno". */
static void __attribute__((noreturn)) failErr(const char *what, long err)
{
	put(what);
	put(": ");
	puterr(-err);
	fail(kindOf(err));
}

/* failPath is fail with "what "path": errno". */
static void __attribute__((noreturn)) failPathAs(char kind, const char *what, const char *p, long err)
{
	put(what);
	putc_(' ');
	putq(p);
	put(": ");
	puterr(-err);
	fail(kind);
}

static void __attribute__((noreturn)) failPath(const char *what, const char *p, long err)
{
	failPathAs(kindOf(err), what, p, err);
}

/* --- arguments --- */

static void __attribute__((noreturn)) usage(const char *unexpected)
{
	if (unexpected) {
		put("launcher usage: unexpected ");
		putq(unexpected);
	} else
		put("launcher usage: no command after --");
	fail('S');
}

static void add(const char **list, int *n, const char *p)
{
	if (*n == MAX_PATHS) {
		put("launcher usage: too many paths");
		fail('S');
	}
	list[(*n)++] = p;
}

static void parse(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (streq(a, "--") && more) {
			spec.argv = argv + i + 1;
			return;
		} else if (streq(a, "-ns") && more)
			spec.parent_ns = argv[++i];
		else if (streq(a, "-w") && more)
			add(spec.writable, &spec.nwritable, argv[++i]);
		else if (streq(a, "-p") && more)
			add(spec.protected, &spec.nprotected, argv[++i]);
		else if (streq(a, "-pin") && more)
			add(spec.pins, &spec.npins, argv[++i]);
		else if ((streq(a, "-deny") || streq(a, "-rf")) && more)
			i++; /* in the ruleset already */
		else if (streq(a, "-net") && more && streq(argv[i + 1], "off"))
			i++; /* in the seccomp program already */
		else
			usage(a);
	}
	usage(0);
}

/* --- the mount namespace (mountns_linux.go) --- */

static int within(const char *p, const char *d)
{
	size_t n = slen(d);
	if (n == 1 && d[0] == '/')
		return 1;
	for (size_t i = 0; i < n; i++)
		if (p[i] != d[i])
			return 0;
	return p[n] == 0 || p[n] == '/';
}

static int withinAny(const char *p, const char **list, int n)
{
	for (int i = 0; i < n; i++)
		if (within(p, list[i]))
			return 1;
	return 0;
}

/* openNoSymlinks opens p as an O_PATH descriptor without following any
 * symlink in it: the paths arrive canonical, so a symlink found now was
 * swapped in since, and the launcher fails instead. */
static long openNoSymlinks(const char *p)
{
	struct open_how how = {O_PATH | O_CLOEXEC | O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS};
	return sys4(NR_openat2, AT_FDCWD, p, &how, sizeof(how));
}

static long fileType(long fd, const char *path, int flags)
{
	u8 stx[256];
	long err = sys5(NR_statx, fd, path, flags, STATX_TYPE, stx);
	if (err < 0)
		return err;
	return *(u16 *)(stx + 28) & S_IFMT; /* stx_mode */
}

/* cloneTree clones the tree of mounts at fd, with the mount attributes
 * attrs set on each, and returns the detached clone. */
static long cloneTree(long fd, const char *p, u64 attrs)
{
	long tree = sys3(NR_open_tree, fd, "", OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	if (tree < 0)
		failPath("open_tree", p, tree);
	if (attrs) {
		struct mount_attr attr = {attrs, 0, 0, 0};
		long err = sys5(NR_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr));
		if (err < 0)
			failPath("mount_setattr", p, err);
	}
	return tree;
}

/* attach mounts the clone tree on fd, and closes it. */
static void attach(long tree, long fd, const char *p)
{
	long err = sys5(NR_move_mount, tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
	if (err < 0)
		failPath("move_mount", p, err);
	sys1(NR_close, tree);
}

/* bindOnto binds the tree at fd onto itself, read-only (recursively) when
 * ro: the path becomes a mount point, which rename and rmdir refuse. */
static void bindOnto(long fd, const char *p, int ro)
{
	attach(cloneTree(fd, p, ro ? MOUNT_ATTR_RDONLY : 0), fd, p);
}

static void bindEach(const char **paths, int n, int ro)
{
	for (int i = 0; i < n; i++) {
		if (!withinAny(paths[i], dirs, ndirs))
			continue;
		long fd = openNoSymlinks(paths[i]);
		if (fd == -ENOENT)
			continue;
		if (fd < 0)
			failPath("opening", paths[i], fd);
		bindOnto(fd, paths[i], ro);
		sys1(NR_close, fd);
	}
}

/* ownNamespace reports whether this process's mount namespace is not
 * bashcall's, given as the decimal inode number of its /proc/self/ns/mnt
 * (mountNSID in sandbox_linux.go). Anything unreadable or malformed is not
 * ours: the launcher then changes no mount. */
static int ownNamespace(const char *parent)
{
	size_t n = slen(parent);
	if (n == 0 || n > 20)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (parent[i] < '0' || parent[i] > '9')
			return 0;
	u8 stx[256];
	if (sys5(NR_statx, AT_FDCWD, "/proc/self/ns/mnt", 0, STATX_INO, stx) < 0)
		return 0;
	u64 ino = *(u64 *)(stx + 32); /* stx_ino */
	char digits[24];
	int i = 23;
	digits[i] = 0;
	do
		digits[--i] = (char)('0' + ino % 10);
	while (ino /= 10);
	return !streq(digits + i, parent);
}

/* confineMounts arranges the namespace: the writable directories are
 * cloned as they are, every mount of the namespace turns read-only (the
 * whole tree at once: no mount point is looked up by path, so none is out
 * of reach behind a directory this user cannot search or under a name
 * mountinfo mangles), the clones are attached back onto their paths, and
 * pinned and protected paths inside them are bound onto themselves. */
static void confineMounts(void)
{
	if (!ownNamespace(spec.parent_ns)) {
		put("the launcher is not in a mount namespace of its own: it changes no mount");
		fail('S');
	}
	long err = sys5(NR_mount, "", "/", "", MS_REC | MS_PRIVATE, "");
	if (err < 0)
		failErr("making mounts private", err);
	/* But for /dev, every mount refuses to open a device file: devices
	 * read through another name (a bind of /dev elsewhere, a second
	 * devtmpfs, a node on a disk) are not filtered as /dev's are. /dev's
	 * own tree of mounts, cloned read-only with the flags each had, goes
	 * back over it once every mount is nodev: clearing nodev on it instead
	 * would fail in a user namespace on the mounts below /dev that came
	 * nodev (/dev/shm), whose flag is locked there. Where /dev is a
	 * directory of the root mount (some containers), its clone is a bind
	 * of that directory. Where /dev is missing, a symlink or not a
	 * directory, nothing is put back (no confined call starts there:
	 * bashcall opens /dev/null, and the rules' paths in /dev without
	 * symlinks). */
	long devTree = -1;
	long dev = openNoSymlinks("/dev");
	if (dev >= 0 && fileType(dev, "", AT_EMPTY_PATH) != S_IFDIR) {
		sys1(NR_close, dev);
		dev = -1;
	}
	if (dev >= 0)
		devTree = cloneTree(dev, "/dev", MOUNT_ATTR_RDONLY);
	for (int i = 0; i < spec.nwritable; i++) {
		const char *w = spec.writable[i];
		long fd = openNoSymlinks(w);
		if (fd == -ENOENT)
			continue;
		if (fd < 0)
			failPath("opening", w, fd);
		if (fileType(fd, "", AT_EMPTY_PATH) == S_IFDIR) {
			u64 a = MOUNT_ATTR_NODEV;
			if (within(w, "/dev") && !within(w, "/dev/shm") && !within(w, "/dev/mqueue"))
				a = 0; /* the user's grant of a directory of devices */
			trees[ndirs] = cloneTree(fd, w, a);
			dirs[ndirs++] = w;
		}
		sys1(NR_close, fd);
	}
	struct mount_attr attr = {MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV, 0, 0, 0};
	err = sys5(NR_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &attr, sizeof(attr));
	if (err < 0)
		failErr("making every mount read-only", err);
	if (dev >= 0) {
		attach(devTree, dev, "/dev");
		sys1(NR_close, dev);
		/* granted whole by the read grant: no device there is filtered */
		static const char *whole[] = {"/dev/shm", "/dev/mqueue"};
		for (int i = 0; i < 2; i++) {
			long fd = openNoSymlinks(whole[i]);
			if (fd == -ENOENT || fd == -ELOOP)
				continue;
			if (fd < 0)
				failPath("opening", whole[i], fd);
			if (fileType(fd, "", AT_EMPTY_PATH) == S_IFDIR)
				attach(cloneTree(fd, whole[i], MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV), fd, whole[i]);
			sys1(NR_close, fd);
		}
	}
	/* Shorter paths first, so that a directory's clone goes on before
	 * the clones of the directories inside it, which it would hide; each
	 * is opened again, through the clones attached before it. */
	for (int i = 1; i < ndirs; i++) {
		for (int j = i; j > 0 && slen(dirs[j]) < slen(dirs[j - 1]); j--) {
			const char *d = dirs[j];
			long t = trees[j];
			dirs[j] = dirs[j - 1], trees[j] = trees[j - 1];
			dirs[j - 1] = d, trees[j - 1] = t;
		}
	}
	for (int i = 0; i < ndirs; i++) {
		long fd = openNoSymlinks(dirs[i]);
		if (fd < 0)
			failPath("opening", dirs[i], fd);
		attach(trees[i], fd, dirs[i]);
		sys1(NR_close, fd);
	}
	bindEach(spec.pins, spec.npins, 0);
	bindEach(spec.protected, spec.nprotected, 1);
	/* The working directory still names the mount it was entered on,
	 * read-only now: enter it again by path, through the new mounts. */
	static char wd[4096];
	err = sys2(NR_getcwd, wd, sizeof(wd));
	if (err < 0)
		failErr("getcwd", err);
	err = sys1(NR_chdir, wd);
	if (err < 0) /* the workdir's, not the sandbox's, fault */
		failPathAs('E', "chdir", wd, err);
}

/* --- privileges (sandbox_linux.go) --- */

static int hasCapability(int c)
{
	struct cap_header hdr = {CAP_VERSION_3, 0};
	struct cap_data data[2];
	if (sys2(NR_capget, &hdr, data) < 0)
		return 0;
	return (data[c / 32].effective >> (c % 32)) & 1;
}

/* dropCapabilities empties every capability set: bounding (so that an exec
 * as root gains nothing back), ambient, inheritable, permitted, effective.
 * Without CAP_SETPCAP the bounding set and the secure bits cannot change;
 * no_new_privs then keeps exec from granting file capabilities. */
static void dropCapabilities(void)
{
	if (hasCapability(CAP_SETPCAP)) {
		long err = sys5(NR_prctl, PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0);
		if (err < 0)
			failErr("prctl(PR_SET_SECUREBITS)", err);
		for (long c = 0;; c++) {
			err = sys5(NR_prctl, PR_CAPBSET_DROP, c, 0, 0, 0);
			if (err == -EINVAL)
				break; /* past the last capability this kernel knows */
			if (err < 0) {
				put("prctl(PR_CAPBSET_DROP, ");
				putint(c);
				put(")");
				failErr("", err);
			}
		}
	}
	long err = sys5(NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (err < 0 && err != -EINVAL)
		failErr("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", err);
	struct cap_header hdr = {CAP_VERSION_3, 0};
	struct cap_data data[2] = {{0, 0, 0}, {0, 0, 0}};
	err = sys2(NR_capset, &hdr, data);
	if (err < 0)
		failErr("capset", err);
}

/* readAll reads fd to its end into b, at most n bytes. */
static long readAll(long fd, char *b, long n, const char *what)
{
	long got = 0;
	for (;;) {
		long r = sys3(NR_read, fd, b + got, n - got);
		if (r < 0)
			failErr(what, r);
		if (r == 0)
			return got;
		got += r;
		if (got == n) {
			put(what);
			put(": too long");
			fail('S');
		}
	}
}

/* readProgram reads descriptor 5 to its end: 'P' and the seccomp program,
 * or 'S' and why bashcall could not prepare the confinement. */
static long readProgram(void)
{
	char kind = 0;
	long r = sys3(NR_read, PROGRAM_FD, &kind, 1);
	if (r < 0)
		failErr("reading the seccomp program", r);
	if (kind == 'S' || kind == 'E') {
		char *why = (char *)program;
		why[readAll(PROGRAM_FD, why, sizeof(program) - 1, "reading why bashcall failed")] = 0;
		put(why);
		fail(kind);
	}
	long n = readAll(PROGRAM_FD, (char *)program, sizeof(program), "reading the seccomp program");
	sys1(NR_close, PROGRAM_FD);
	if (kind != 'P' || n == 0 || n % sizeof(struct sock_filter)) {
		put("no seccomp program on descriptor 5");
		fail('S');
	}
	return n / sizeof(struct sock_filter);
}

void __attribute__((noreturn, used)) launch(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	msglen = 1; /* msg[0] is the kind */
	/* Like bashcall itself, not dumpable: no process of the user attaches
	 * to it or reads its memory before it is confined. exec makes the
	 * command dumpable again. */
	sys5(NR_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);

	if (fileType(STATUS_FD, "", AT_EMPTY_PATH) != S_IFIFO) {
		static const char e[] = "bashcall: error: __launch is internal to bashcall: it needs its status pipe as descriptor 3\n";
		sys3(NR_write, 2, e, sizeof(e) - 1);
		sys1(NR_exit_group, 1);
	}
	long err = sys3(NR_fcntl, STATUS_FD, F_SETFD, FD_CLOEXEC);
	if (err < 0)
		failErr("fcntl", err);
	err = sys3(NR_close_range, PROGRAM_FD + 1, ~0U, 0);
	if (err < 0)
		failErr("close_range", err);
	long filters = readProgram();
	if (argc < 2 || !streq(argv[1], "__launch"))
		usage(argc < 2 ? "" : argv[1]);
	parse(argc, argv);
	if (spec.parent_ns)
		confineMounts();
	dropCapabilities();
	err = sys5(NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (err < 0)
		failErr("prctl(PR_SET_NO_NEW_PRIVS)", err);
	err = sys2(NR_landlock_restrict_self, RULESET_FD, 0);
	if (err < 0)
		failErr("landlock_restrict_self", err);
	sys1(NR_close, RULESET_FD);
	struct sock_fprog prog = {(unsigned short)filters, program};
	err = sys5(NR_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
	if (err < 0)
		failErr("prctl(PR_SET_SECCOMP)", err);
	err = sys3(NR_execve, spec.argv[0], spec.argv, envp);
	put("exec ");
	putq(spec.argv[0]);
	put(": ");
	puterr(-err);
	fail('E');
}
