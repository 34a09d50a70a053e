"""The CUDA stage's effects: archives downloaded, checked, unpacked and merged into one root."""
