/* System calls without libc, for the two architectures the launcher is
 * built for. The numbers below 424 differ between them; from 424 on they
 * are shared (see the kernel's scripts/syscall.tbl). */

typedef unsigned long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long size_t;

#if defined(__x86_64__)
#define NR_read 0
#define NR_write 1
#define NR_close 3
#define NR_execve 59
#define NR_fcntl 72
#define NR_getcwd 79
#define NR_chdir 80
#define NR_capget 125
#define NR_capset 126
#define NR_prctl 157
#define NR_mount 165
#define NR_exit_group 231
#define NR_openat 257
#define NR_statx 332
#define O_NOFOLLOW 0400000

static long syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The kernel enters with the stack pointer at argc. */
__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	xor %rbp, %rbp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call launch\n"
	"	hlt\n");

#elif defined(__aarch64__)
#define NR_getcwd 17
#define NR_fcntl 25
#define NR_mount 40
#define NR_chdir 49
#define NR_openat 56
#define NR_close 57
#define NR_read 63
#define NR_write 64
#define NR_capget 90
#define NR_capset 91
#define NR_exit_group 94
#define NR_prctl 167
#define NR_execve 221
#define NR_statx 291
#define O_NOFOLLOW 0100000

static long syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	mov x0, sp\n"
	"	bl launch\n"
	"	brk #0\n");

#else
#error "the native launcher is built for x86_64 and aarch64 only"
#endif

#define NR_open_tree 428
#define NR_move_mount 429
#define NR_close_range 436
#define NR_openat2 437
#define NR_mount_setattr 442
#define NR_landlock_restrict_self 446

#define sys0(n) syscall6(n, 0, 0, 0, 0, 0, 0)
#define sys1(n, a) syscall6(n, (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) syscall6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) syscall6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys5(n, a, b, c, d, e) syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* The compiler may emit calls to these for struct copies and zeroing. */
void *memset(void *d, int c, size_t n)
{
	u8 *p = d;
	while (n--)
		*p++ = (u8)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	u8 *p = d;
	const u8 *q = s;
	while (n--)
		*p++ = *q++;
	return d;
}
