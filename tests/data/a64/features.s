// one instruction of each encoding class of dswheels/kernel/binaries/a64.py (tests/data/a64/README.md)
ld1w {z0.s}, p0/z, [x0]  // sve
zero {za}  // sme
smstart  // sme
sdot v0.4s, v1.16b, v2.16b  // dotprod
udot v0.4s, v1.16b, v2.4b[1]  // dotprod
fadd h0, h1, h2  // fp16
fadd v0.8h, v1.8h, v2.8h  // fp16
fabs v0.4h, v1.4h  // fp16
fabd h0, h1, h2  // fp16
fcmeq h0, h1, #0.0  // fp16
fmla v0.8h, v1.8h, v2.h[1]  // fp16
fmul h0, h1, v2.h[1]  // fp16
fmov v0.8h, #1.0  // fp16
fmlal v0.4s, v1.4h, v2.4h  // fp16fml
fmlal2 v0.4s, v1.4h, v2.4h  // fp16fml
fmlal v0.4s, v1.4h, v2.h[1]  // fp16fml
fmlal2 v0.4s, v1.4h, v2.h[1]  // fp16fml
ldapr w0, [x1]  // rcpc
ldapur w0, [x1, #4]  // rcpc
retaa  // pauth
pacia x0, x1  // pauth
ldraa x0, [x1]  // pauth
pacga x0, x1, x2  // pauth
fjcvtzs w0, d1  // jscvt
fcmla v0.4s, v1.4s, v2.4s, #90  // fcma
fcadd v0.4s, v1.4s, v2.4s, #90  // fcma
fcmla v0.8h, v1.8h, v2.h[1], #90  // fcma
cfinv  // flagm
rmif x0, #3, #2  // flagm
setf8 w0  // flagm
frint32z s0, s1  // frintts
frint32x v0.4s, v1.4s  // frintts
bfcvt h0, s1  // bf16
bfcvtn v0.4h, v1.4s  // bf16
bfdot v0.4s, v1.8h, v2.8h  // bf16
bfmmla v0.4s, v1.8h, v2.8h  // bf16
bfmlalb v0.4s, v1.8h, v2.8h  // bf16
bfdot v0.4s, v1.8h, v2.2h[1]  // bf16
bfmlalt v0.4s, v1.8h, v2.h[1]  // bf16
smmla v0.4s, v1.16b, v2.16b  // i8mm
usmmla v0.4s, v1.16b, v2.16b  // i8mm
usdot v0.4s, v1.16b, v2.16b  // i8mm
usdot v0.4s, v1.16b, v2.4b[1]  // i8mm
sudot v0.4s, v1.16b, v2.4b[1]  // i8mm
