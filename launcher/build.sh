#!/bin/sh
# Builds the native launcher for each architecture bashcall embeds it for,
# from launcher.c alone: no libc, static, no build id, so that the bytes
# depend only on the source and the compiler. Run by go generate (see
# launcher_linux.go); CI rebuilds and fails if the bytes differ.
set -eu
cd "$(dirname "$0")"
flags="-Os -static -nostdlib -ffreestanding -fno-builtin -fno-stack-protector -fno-pie -no-pie
	-fno-asynchronous-unwind-tables -fno-unwind-tables -fno-ident -fcf-protection=none
	-Wall -Wextra -Werror -Wl,--build-id=none -Wl,-z,noexecstack -Wl,-z,norelro -s"
build() { # compiler, output
	"$1" $flags -o "$2" launcher.c
}
build "${CC_AMD64:-x86_64-linux-gnu-gcc}" launcher_amd64.bin
build "${CC_ARM64:-aarch64-linux-gnu-gcc}" launcher_arm64.bin
