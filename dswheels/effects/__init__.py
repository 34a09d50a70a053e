"""The effectful shell: the only place dswheels runs processes, touches the network or writes files."""
