#!/usr/bin/env python3
"""Generates cpu_math_refs.h: numpy references for tests/kernels/cpu_*_test.cc math kernels.

Run: python3 tests/kernels/gen_cpu_math_refs.py > tests/kernels/cpu_math_refs.h
Inputs are pat(shape, a, b, m, s)[i] = (((i*a+b) % m) - m//2) * s, mirrored by pat() in the tests.
"""
import numpy as np
def pat(shape, a=7, b=3, m=11, s=0.1):
    n = int(np.prod(shape)) if len(shape) else 1
    i = np.arange(n)
    return (((i * a + b) % m) - m // 2).astype(np.float32).reshape(shape) * np.float32(s)
def fmt(x):
    def one(v):
        t = "%.9g" % v
        if not any(c in t for c in ".en"): t += ".0"
        return t + "f"
    return "{" + ", ".join(one(v) for v in np.asarray(x, dtype=np.float64).ravel()) + "}"
out = {}
# matmul broadcast
A = pat([2,1,3,4]); B = pat([3,4,5], 5, 1, 13, 0.2)
out['mm_bcast'] = A @ B
out['mm_vec_left'] = pat([4]) @ pat([2,4,3], 5, 1, 13, 0.2)
out['mm_vec_right'] = pat([2,3,4]) @ pat([4], 5, 1, 13, 0.2)
out['mm_vec_vec'] = np.array(pat([4]) @ pat([4], 5, 1, 13, 0.2))
# gemm transA transB alpha beta, C [N]
Ag = pat([4,3]); Bg = pat([5,4], 5, 1, 13, 0.2); Cg = pat([5], 3, 2, 7, 0.5)
out['gemm'] = 0.5 * (Ag.T @ Bg.T) + 2.0 * Cg
# conv
def conv2d(x, w, b, stride, pads, dil, group):
    N, C, H, W = x.shape; OC, Cg, KH, KW = w.shape
    xp = np.zeros((N, C, H + pads[0] + pads[2], W + pads[1] + pads[3]), np.float64)
    xp[:, :, pads[0]:pads[0]+H, pads[1]:pads[1]+W] = x
    OH = (xp.shape[2] - ((KH-1)*dil[0]+1)) // stride[0] + 1
    OW = (xp.shape[3] - ((KW-1)*dil[1]+1)) // stride[1] + 1
    y = np.zeros((N, OC, OH, OW))
    ocg = OC // group
    for n in range(N):
        for oc in range(OC):
            g = oc // ocg
            for oh in range(OH):
                for ow in range(OW):
                    s = 0.0
                    for c in range(Cg):
                        for kh in range(KH):
                            for kw in range(KW):
                                s += xp[n, g*Cg+c, oh*stride[0]+kh*dil[0], ow*stride[1]+kw*dil[1]] * w[oc, c, kh, kw]
                    y[n, oc, oh, ow] = s + (b[oc] if b is not None else 0)
    return y
x = pat([1,4,5,6]); w = pat([4,2,3,2], 5, 1, 13, 0.2); b = pat([4], 3, 2, 7, 0.5)
out['conv_g2'] = conv2d(x, w, b, (2,1), (1,0,1,1), (1,2), 2)
x2 = pat([2,3,4,4]); w2 = pat([2,3,3,3], 5, 1, 13, 0.2)
# SAME_UPPER stride 2: out 2x2, total pad = max(0,(2-1)*2+3-4)=1 -> begin 0, end 1
out['conv_same'] = conv2d(x2, w2, None, (2,2), (0,0,1,1), (1,1), 1)
# pools on x [1,2,5,5]
xp_ = pat([1,2,5,5])
def pool(x, k, s, pads, mode, include_pad=False, ceil=False):
    N,C,H,W = x.shape
    def osz(i, kk, ss, pb, pe):
        room = i + pb + pe - kk
        o = (-(-room // ss) if ceil else room // ss) + 1
        if ceil and (o-1)*ss >= i + pb: o -= 1
        return o
    OH = osz(H,k[0],s[0],pads[0],pads[2]); OW = osz(W,k[1],s[1],pads[1],pads[3])
    y = np.zeros((N,C,OH,OW))
    for n in range(N):
        for c in range(C):
            for oh in range(OH):
                for ow in range(OW):
                    vals=[]; cnt=0
                    for kh in range(k[0]):
                        for kw in range(k[1]):
                            ih = oh*s[0]-pads[0]+kh; iw = ow*s[1]-pads[1]+kw
                            if -pads[0] <= ih < H+pads[2] and -pads[1] <= iw < W+pads[3]: cnt+=1
                            if 0<=ih<H and 0<=iw<W: vals.append(x[n,c,ih,iw])
                    y[n,c,oh,ow] = max(vals) if mode=='max' else sum(vals)/(cnt if include_pad else len(vals))
    return y
out['maxpool'] = pool(xp_, (3,3), (2,2), (1,1,1,1), 'max')
out['avgpool_excl'] = pool(xp_, (3,3), (2,2), (1,1,1,1), 'avg')
out['avgpool_incl'] = pool(xp_, (3,3), (2,2), (1,1,1,1), 'avg', True)
out['maxpool_ceil'] = pool(xp_, (2,2), (2,2), (0,0,0,0), 'max', ceil=True)
# layernorm axis -1 on [2,3,4], axis 1
xl = pat([2,3,4]); g = pat([4], 3, 2, 7, 0.5); bb = pat([4], 5, 1, 13, 0.2)
mu = xl.mean(-1, keepdims=True); var = xl.var(-1, keepdims=True)
out['ln'] = (xl - mu) / np.sqrt(var + 1e-5) * g + bb
out['ln_mean'] = mu; out['ln_inv'] = 1/np.sqrt(var + 1e-5)
g2 = pat([3,4], 3, 2, 7, 0.5)
mu2 = xl.reshape(2,-1).mean(-1).reshape(2,1,1); var2 = xl.reshape(2,-1).var(-1).reshape(2,1,1)
out['ln_axis1'] = (xl - mu2) / np.sqrt(var2 + 1e-3) * g2
# einsum
q = pat([2,2,3,4]); k = pat([2,2,5,4], 5, 1, 13, 0.2)
out['ein_attn'] = np.einsum('bhqd,bhkd->bhqk', q, k)
a3 = pat([2,3,4]); b3 = pat([2,4,2], 5, 1, 13, 0.2)
out['ein_bmm'] = np.einsum('bij,bjk->bik', a3, b3)
out['ein_implicit'] = np.einsum('ij,jk', pat([3,4]), pat([4,2], 5, 1, 13, 0.2))
out['ein_ell'] = np.einsum('...ij,...jk->...ik', a3, b3)
out['ein_diag'] = np.einsum('ii->i', pat([3,3]))
out['ein_sum'] = np.einsum('ij->', pat([3,3]))
# softmax on [2,3] axis 0 and -1
sx = pat([2,3])
e = np.exp(sx - sx.max(-1, keepdims=True)); out['softmax_last'] = e / e.sum(-1, keepdims=True)
e0 = np.exp(sx - sx.max(0, keepdims=True)); out['softmax_0'] = e0 / e0.sum(0, keepdims=True)
out['logsoftmax_last'] = sx - sx.max(-1, keepdims=True) - np.log(e.sum(-1, keepdims=True))
# reduce
rx = pat([2,3,4])
out['rmean_m1_m3'] = rx.mean(axis=(-1,-3), keepdims=True)
out['rsum_1'] = rx.sum(axis=1)
out['rmax_1'] = rx.max(axis=1, keepdims=True)
out['rsum_all'] = np.array(rx.sum())
print("// Generated by tests/kernels/gen_cpu_math_refs.py (numpy); do not edit.")
print("#pragma once")
print("#include <vector>")
print("namespace cpu_math_refs {")
for kk, v in out.items():
    v = np.asarray(v)
    print(f"// {kk}: shape {list(v.shape)}")
    print(f"static const std::vector<float> k_{kk} = {fmt(v)};")
print("}  // namespace cpu_math_refs")
