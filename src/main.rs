fn main() {
    println!("gpuplan");
}
