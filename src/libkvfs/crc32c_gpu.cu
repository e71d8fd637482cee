/*
 * crc32c_gpu.cu - the raw CRC-32C of each piece of a block in device
 * memory, one thread a piece: what libkvfs hands kvfsd with a block it
 * copied from the device, so that sealing it reads no byte on the host
 * (kvfs_crc32c_chunks() in src/common/crc32c.h combines the pieces).
 *
 * Not compiled by the build: libkvfs loads the PTX that
 * src/libkvfs/crc32c_gpu_ptx.h holds, made from this file by
 * scripts/gpu-ptx.sh (nvcc -ptx), at run time through the CUDA runtime
 * (cudaLibraryLoadData), so that a build needs no nvcc.
 */
#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

extern "C" __global__ void kvfs_crc32c_pieces(const unsigned char *p,
					      unsigned long long len,
					      unsigned int piece,
					      unsigned int *out)
{
	__shared__ unsigned int t[4][256];
	unsigned long long i, n, m;
	const unsigned char *q;
	unsigned int crc = 0;

	/* slicing-by-4 tables, in each thread block's shared memory */
	for (unsigned int b = threadIdx.x; b < 256; b += blockDim.x) {
		unsigned int c = b;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY & (0u - (c & 1)));
		t[0][b] = c;
	}
	__syncthreads();
	for (unsigned int b = threadIdx.x; b < 256; b += blockDim.x) {
		unsigned int c = t[0][b];

		for (int s = 1; s < 4; s++) {
			c = (c >> 8) ^ t[0][c & 0xff];
			t[s][b] = c;
		}
	}
	__syncthreads();

	n = (len + piece - 1) / piece;
	i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	q = p + i * piece;
	m = len - i * piece;
	if (m > piece)
		m = piece;
	while (m && ((unsigned long long)q & 3)) {
		crc = t[0][(crc ^ *q++) & 0xff] ^ (crc >> 8);
		m--;
	}
	for (; m >= 4; m -= 4, q += 4) {
		unsigned int w = *(const unsigned int *)q ^ crc;

		crc = t[3][w & 0xff] ^ t[2][(w >> 8) & 0xff] ^
		      t[1][(w >> 16) & 0xff] ^ t[0][w >> 24];
	}
	while (m--)
		crc = t[0][(crc ^ *q++) & 0xff] ^ (crc >> 8);
	out[i] = crc;
}
