// Armv8.0-8.2 instructions (with NEON and the LSE atomics of 8.1) a baseline build has: none is above armv8.2-a
add x0, x1, x2
fadd v0.4s, v1.4s, v2.4s
fmla v0.4s, v1.4s, v2.4s
fsqrt v0.4s, v1.4s
fdiv v0.4s, v1.4s, v2.4s
ldaxr w0, [x1]
stlxr w2, w0, [x1]
ldar w0, [x1]
cas w0, w1, [x2]
ldadd w0, w1, [x2]
swpal x0, x1, [x2]
sqrdmlah v0.4s, v1.4s, v2.4s
fcvt s0, h1
fcvt h0, s1
fcvt d0, h1
fcvtl v0.4s, v1.4h
fcvtn v0.4h, v1.4s
crc32cx w0, w1, x2
paciasp
autiasp
bti c
ret
br x1
blr x2
dmb ish
fmov s0, w1
fmov d0, x1
ldr q0, [x1]
ld1 {v0.4s, v1.4s}, [x0]
st1 {v0.4s}, [x0]
zip1 v0.8h, v1.8h, v2.8h
ext v0.16b, v1.16b, v2.16b, #4
tbl v0.16b, {v1.16b}, v2.16b
dup v0.4s, w1
addv s0, v1.4s
ushll v0.4s, v1.4h, #8
shrn v0.4h, v1.4s, #16
ldr x0, [x1, x2]
umaddl x0, w1, w2, x3
